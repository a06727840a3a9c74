"""``bulk_load``: unsaved instances written through the database's own bulk loader.

Every key of a Snowflake-keyed model exists before the INSERT, so nothing has to come back
from the database (no ``RETURNING``) and the rows can go through the fastest path each
backend has: PostgreSQL ``COPY ... FROM STDIN`` (binary where every column's type allows it),
MariaDB/MySQL ``LOAD DATA LOCAL INFILE`` where both client and server allow it (else a
multi-row ``INSERT``), SQLite one prepared ``executemany``.

The values are the ones ``bulk_create`` would send: each field's ``pre_save(obj, add=True)``
then ``get_db_prep_save()``, defaults applied by ``Model.__init__``, ``db_default`` left to
the database, foreign keys by their ``_id``. The load runs in one transaction
(``transaction.atomic``), in batches, so a generator of instances is consumed with flat memory.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import re
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice, repeat
from operator import attrgetter, itemgetter
from typing import Any

from django.db import DatabaseError, connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import DatabaseDefault
from django.db.models.fields.related import ForeignObject

from . import generate
from .exceptions import BulkLoadError
from .fields import SnowflakeAutoField, SnowflakeField

__all__ = ["DEFAULT_BATCH_SIZE", "BulkLoadError", "bulk_load"]

#: Rows per batch when ``batch_size`` is not given: large enough that the per-batch round
#: trips vanish, small enough that a batch of instances stays a few megabytes.
DEFAULT_BATCH_SIZE = 10_000

Row = tuple[Any, ...]
Progress = Callable[[int], object]


# Django's own field classes whose get_db_prep_save() returns a value of the class given as
# it is (up to psycopg's integer wrappers, which pin a parameter's type and change nothing in
# a column of that type). For such a value the call is skipped; any other value, and every
# other field class (subclasses included: they may override a conversion), takes the call.
_IDENTITY: dict[type[models.Field[Any, Any]], type] = {
    models.CharField: str,
    models.TextField: str,
    models.SlugField: str,
    models.EmailField: str,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.SmallIntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveBigIntegerField: int,
    models.PositiveSmallIntegerField: int,
    models.BooleanField: bool,
    models.FloatField: float,
    SnowflakeField: int,
    SnowflakeAutoField: int,
}

# PostgreSQL column types (``Field.db_type()``, parameters dropped) that binary COPY writes
# with psycopg's dumper for that type, and the value classes get_db_prep_save() gives them.
_PG_BINARY = {
    "bigint": "int8",
    "integer": "int4",
    "smallint": "int2",
    "boolean": "bool",
    "double precision": "float8",
    "real": "float4",
    "varchar": "varchar",
    "text": "text",
    "numeric": "numeric",
    "date": "date",
    "time": "time",
    "timestamp with time zone": "timestamptz",
    "uuid": "uuid",
    "bytea": "bytea",
    "interval": "interval",
    "jsonb": "jsonb",
}

# django.contrib.postgres: the array element types (ArrayField's base_field) and range types
# that binary COPY writes. An array's elements are what its base field's get_db_prep_value()
# gives, dumped by psycopg's binary list dumper for the element type (NULL elements and
# nested, rectangular lists included); other element types (jsonb, whose values Django
# wraps in an adapter, and the rest untested here) send the table through text COPY. Ranges
# are Django's psycopg Range subclasses, dumped by psycopg's binary range dumpers.
_PG_BINARY_ARRAY_ELEMENTS = {
    "int2",
    "int4",
    "int8",
    "text",
    "varchar",
    "bool",
    "float8",
    "numeric",
    "date",
    "uuid",
    "timestamptz",
}
_PG_BINARY_RANGES = {"int4range", "int8range", "numrange", "daterange", "tstzrange"}
_PG_ARRAY = re.compile(r"^(.*?)((?:\[\d*\])+)$")


def _fast_class(field: models.Field[Any, Any]) -> type | None:
    """The value class whose values ``field`` stores as they are, or ``None``."""
    if isinstance(field, ForeignObject):
        target = field.target_field
        if type(field) in (models.ForeignKey, models.OneToOneField):
            return _IDENTITY.get(type(target))
        return None
    return _IDENTITY.get(type(field))


def _is_pre_save_djangos(field: models.Field[Any, Any]) -> bool:
    """Whether ``field.pre_save()`` is Django's own: DateField and DateTimeField override it
    for auto_now(_add), which reads the clock and nothing else."""
    return type(field).pre_save in (
        models.Field.pre_save,
        models.DateField.pre_save,
        models.DateTimeField.pre_save,
    )


def _is_pre_save_plain(field: models.Field[Any, Any]) -> bool:
    """Whether ``field.pre_save(obj, add=True)`` only reads the attribute."""
    if type(field).pre_save is not models.Field.pre_save:
        if _is_pre_save_djangos(field):
            return not (field.auto_now or field.auto_now_add)  # type: ignore[attr-defined]
        return False
    return True


class _Plan:
    """What a load needs to know about a model on a connection, worked out once."""

    def __init__(self, model: type[models.Model], connection: BaseDatabaseWrapper) -> None:
        opts = model._meta
        self.model = model
        self.connection = connection
        self.table: str = opts.db_table
        self.pk = opts.pk
        # bulk_create writes every concrete column but generated ones.
        self.fields: list[models.Field[Any, Any]] = [
            field for field in opts.concrete_fields if not field.generated
        ]
        self.columns: list[str] = [field.column for field in self.fields if field.column]
        self.pk_position = self.fields.index(opts.pk)
        self.db_default_positions = [
            n for n, field in enumerate(self.fields) if field.has_db_default()
        ]
        self.has_relations = any(field.is_relation for field in opts.concrete_fields) or bool(
            opts.private_fields
        )
        self.foreign_keys = any(isinstance(field, ForeignObject) for field in self.fields)
        self.converters = [self._converter(field) for field in self.fields]
        # Per column, the class whose values need no conversion (None: every value does).
        self.fast_classes = tuple(
            _fast_class(field) if _is_pre_save_plain(field) else None for field in self.fields
        )
        attnames = [field.attname for field in self.fields]
        self.getter: Callable[[models.Model], Row]
        if len(attnames) > 1:
            self.getter = attrgetter(*attnames)
        else:
            self.getter = lambda obj: (getattr(obj, attnames[0]),)
        self.pk_getter = attrgetter(opts.pk.attname)
        # Whether preparing a batch stays off the database connection (no field of the
        # model's own conversion or pre_save(), which might query it): then a batch is
        # prepared while the server still loads the one before (see bulk_load()).
        self.prepares_offline = all(
            _converts_as_django(field)
            and (_is_pre_save_plain(field) or _is_pre_save_djangos(field))
            for field in self.fields
        )

    def _converter(self, field: models.Field[Any, Any]) -> Callable[[models.Model], Any]:
        connection = self.connection
        attname = field.attname
        prep = field.get_db_prep_save
        fast = _fast_class(field)

        def save(value: Any) -> Any:
            # A db_default goes into the INSERT as it is: the database fills it in.
            return value if isinstance(value, DatabaseDefault) else prep(value, connection)

        if not _is_pre_save_plain(field):
            pre_save = field.pre_save
            return lambda obj: save(pre_save(obj, True))
        if fast is not None:

            def convert_fast(obj: models.Model) -> Any:
                value = getattr(obj, attname)
                if value.__class__ is fast or value is None:
                    return value
                return save(value)

            return convert_fast
        return lambda obj: save(getattr(obj, attname))


def _python_key(pk: models.Field[Any, Any]) -> Callable[[], int] | None:
    """What makes a missing key of a SnowflakeAutoField before the INSERT, or ``None``.

    SnowflakeAutoField leaves an unset key to the database at INSERT (as AutoField does) and
    reads it back; bulk_load reads nothing back, so it makes the key in Python instead: an ID
    of the same layout, from this process's own worker slot.
    """
    if isinstance(pk, SnowflakeAutoField) and getattr(pk, "has_database_default", True):
        return generate
    return None


def _check_model(model: type[models.Model]) -> None:
    opts = model._meta
    for parent in opts.all_parents:
        if parent._meta.concrete_model is not opts.concrete_model:
            raise BulkLoadError(
                f"bulk_load cannot load {opts.label}: it inherits from {parent._meta.label} "
                "through multi-table inheritance, whose rows span two tables. "
                "Use bulk_create() or save() for it."
            )
    pk = opts.pk
    if pk is None or not pk.concrete or isinstance(pk, models.CompositePrimaryKey):
        raise BulkLoadError(
            f"bulk_load cannot load {opts.label}: it needs a single-column primary key."
        )
    if _python_key(pk) is None and (
        isinstance(pk, models.AutoField | models.BigAutoField | models.SmallAutoField)
        and not pk.has_default()
    ):
        raise BulkLoadError(
            f"bulk_load cannot load {opts.label}: its primary key {pk.name} "
            f"({type(pk).__name__}) is numbered by the database at INSERT, and bulk_load "
            "asks nothing back. Give the model a key known before the INSERT "
            "(SnowflakeModel, SnowflakeField(primary_key=True) or SnowflakeAutoField), "
            "or use bulk_create()."
        )


def _resolve(model_or_queryset: Any) -> tuple[type[models.Model], str]:
    if isinstance(model_or_queryset, models.QuerySet):
        model = model_or_queryset.model
        using: str | None = getattr(model_or_queryset, "_db", None)
        return model, using or router.db_for_write(model)
    if isinstance(model_or_queryset, models.Manager):
        model = model_or_queryset.model
        return model, model_or_queryset._db or router.db_for_write(model)
    if isinstance(model_or_queryset, type) and issubclass(model_or_queryset, models.Model):
        return model_or_queryset, router.db_for_write(model_or_queryset)
    raise TypeError(
        f"bulk_load() takes a model class, manager or queryset, not {model_or_queryset!r}."
    )


def _batches(objs: Iterable[models.Model], size: int) -> Iterator[list[models.Model]]:
    iterator = iter(objs)
    while batch := list(islice(iterator, size)):
        yield batch


def _prepare(plan: _Plan, batch: list[models.Model], first: int) -> list[Row]:
    """The rows of ``batch``, after the checks and key filling ``bulk_create`` does.

    Column by column, with the loops in C (``map``, ``attrgetter``, ``set``): a column whose
    values are all of the class its field stores as it is (an ``int`` for an
    ``IntegerField``, a ``str`` for a ``CharField``) is taken as read; any other column
    goes through ``pre_save()`` and ``get_db_prep_save()`` value by value.
    """
    model = plan.model
    if not all(issubclass(cls, model) for cls in set(map(type, batch))):
        for n, obj in enumerate(batch):
            if not isinstance(obj, model):
                raise BulkLoadError(
                    f"bulk_load of {model._meta.label}: row {first + n} is {obj!r}, "
                    f"not a {model.__name__} instance."
                )
    if None in set(map(plan.pk_getter, batch)):
        for n, obj in enumerate(batch):
            if obj.pk is None:
                # As bulk_create: a key the field can make before the INSERT (its default).
                make = _python_key(plan.pk)
                obj.pk = make() if make else plan.pk.get_pk_value_on_save(obj)
                if obj.pk is None:
                    raise BulkLoadError(
                        f"bulk_load of {model._meta.label}: row {first + n} has no primary "
                        "key, and its field has no default to make one. "
                        "Set the key before loading."
                    )
    if plan.has_relations:
        for obj in batch:
            obj._prepare_related_fields_for_save(operation_name="bulk_load")  # type: ignore[attr-defined]
    rows = list(map(plan.getter, batch))
    convert = []
    for n, fast in enumerate(plan.fast_classes):
        if fast is None:
            convert.append(n)
            continue
        classes = set(map(type, map(itemgetter(n), rows)))
        classes.discard(type(None))
        if classes and classes != {fast}:
            convert.append(n)
    if convert and rows:
        columns = list(zip(*rows, strict=True))
        for n in convert:
            columns[n] = tuple(map(plan.converters[n], batch))
        rows = list(zip(*columns, strict=True))
    return rows


def _groups(plan: _Plan, rows: list[Row]) -> list[tuple[list[int], list[int]]]:
    """(positions of the columns to send, indexes of the rows) for each group of ``rows``.

    A value left to ``db_default`` is a column not sent: bulk_create sends ``DEFAULT`` (or
    the default's expression where the backend has no ``DEFAULT`` keyword), and a loader
    cannot say ``DEFAULT`` in a row, so rows leaving out the same columns load together.
    """
    every = list(range(len(plan.columns)))
    if not plan.db_default_positions:
        return [(every, list(range(len(rows))))]
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, row in enumerate(rows):
        mask = tuple(n for n in plan.db_default_positions if isinstance(row[n], DatabaseDefault))
        groups.setdefault(mask, []).append(index)
    return [([n for n in every if n not in mask], indexes) for mask, indexes in groups.items()]


def _loaded() -> None:
    """The end of a write that had nothing left to wait for."""


class _Loader:
    """Writes groups of prepared rows to one table; one per backend."""

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan
        self.connection = plan.connection
        self.quote = self.connection.ops.quote_name

    def write(self, positions: list[int], rows: list[Row]) -> None:
        raise NotImplementedError

    def begin(self, positions: list[int], rows: list[Row]) -> Callable[[], None]:
        """Send ``rows``; the function returned waits until the database has loaded them.

        A loader whose server goes on loading after the last row is sent (PostgreSQL's
        COPY) returns before the server is done; the others write at once.
        """
        self.write(positions, rows)
        return _loaded

    def insert_sql(self, positions: list[int]) -> str:
        columns = ", ".join(self.quote(self.plan.columns[n]) for n in positions)
        placeholders = ", ".join(["%s"] * len(positions))
        return f"INSERT INTO {self.quote(self.plan.table)} ({columns}) VALUES ({placeholders})"

    def finish(self) -> None:
        """Checks that wait for the end of the load (deferred foreign keys)."""


class _SQLiteLoader(_Loader):
    def write(self, positions: list[int], rows: list[Row]) -> None:
        sql = self.insert_sql(positions).replace("%s", "?")
        if len(positions) != len(self.plan.columns):
            rows = [tuple(row[n] for n in positions) for row in rows]
        raw = self.connection.connection
        assert raw is not None
        with self.connection.wrap_database_errors:
            raw.executemany(sql, rows)

    def finish(self) -> None:
        if self.plan.foreign_keys:
            # SQLite's foreign keys are deferred to the commit; check the table now, so that
            # the error says which row (Django's message names its primary key).
            self.connection.check_constraints(table_names=[self.plan.table])


#: Rows per block sent to PostgreSQL: tens of kilobytes for small rows, as psycopg sends.
_COPY_BLOCK_ROWS = 1_000

try:  # psycopg's row formatter (C when psycopg_c or psycopg[binary] is installed)
    from psycopg._copy_base import (
        _binary_signature as _BINARY_SIGNATURE,
    )
    from psycopg._copy_base import _binary_trailer as _BINARY_TRAILER
    from psycopg._copy_base import format_row_binary as _format_row_binary
except ImportError:  # another psycopg: write_row() row by row
    _format_row_binary = None


def _converts_as_django(field: models.Field[Any, Any]) -> bool:
    """Whether ``field`` converts values with Django's (or this package's) own methods.

    Binary COPY hands each value to psycopg's dumper for the column's type, which takes only
    the Python class Django's conversion gives; a field converting in its own way may give
    anything the text form of a parameter would take, so its table goes through text COPY.
    """
    for name in ("get_db_prep_save", "get_db_prep_value", "get_prep_value"):
        module = getattr(type(field), name).__module__
        if not module.startswith(("django.", "django_snowflake.")):
            return False
    return True


def _hstore_binary(connection: BaseDatabaseWrapper) -> bool:
    """Whether binary COPY can write hstore on ``connection``.

    psycopg dumps a dict as hstore only once the type is registered on the connection
    (``register_hstore``, which django.contrib.postgres does on connecting, and again when
    its ``HStoreExtension`` migration creates the extension); its binary hstore dumper
    exists from psycopg 3.3. Without either, the table takes text COPY, which needs the
    same registration (and fails as ``bulk_create`` does without it).
    """
    try:
        from psycopg.types import hstore
    except ImportError:  # pragma: no cover - psycopg 3 always has it
        return False
    raw = connection.connection
    return (
        hasattr(hstore, "BaseHstoreBinaryDumper")
        and raw is not None
        and raw.adapters.types.get("hstore") is not None
    )


class _PostgreSQLLoader(_Loader):
    def __init__(self, plan: _Plan) -> None:
        super().__init__(plan)
        self.types: list[str] | None = self._binary_types()

    def _binary_types(self) -> list[str] | None:
        types = []
        for field in self.plan.fields:
            name = self._binary_type(field)
            if name is None:
                return None
            types.append(name)
        return types

    def _binary_type(self, field: models.Field[Any, Any]) -> str | None:
        """The psycopg type name binary COPY writes ``field``'s column as, or ``None``."""
        from django.conf import settings

        if not _converts_as_django(field):
            return None
        db_type = re.sub(r"\(.*?\)", "", (field.db_type(self.connection) or "").lower())
        db_type = db_type.strip()
        array = _PG_ARRAY.match(db_type)
        if array is not None:
            # ArrayField (of ArrayFields): one array type whatever the dimensions, named by
            # its element type; the base field must convert as Django's own do.
            base: Any = field
            while hasattr(base, "base_field"):
                base = base.base_field
                if not _converts_as_django(base):
                    return None
            element = _PG_BINARY.get(array.group(1).strip())
            if element == "timestamptz" and not settings.USE_TZ:
                return None  # naive datetimes, read in the connection's time zone
            return f"{element}[]" if element in _PG_BINARY_ARRAY_ELEMENTS else None
        if db_type in _PG_BINARY_RANGES:
            if db_type == "tstzrange" and not (
                settings.USE_TZ and self.connection.timezone_name == "UTC"
            ):
                # Django leaves a range's datetimes as they are: a naive bound goes as text,
                # read in the connection's time zone, where binary would read it as UTC.
                return None
            return db_type
        if db_type == "hstore":
            return "hstore" if _hstore_binary(self.connection) else None
        name = _PG_BINARY.get(db_type)
        if name == "timestamptz" and not settings.USE_TZ:
            return None  # naive datetimes, read in the connection's time zone
        return name

    def begin(self, positions: list[int], rows: list[Row]) -> Callable[[], None]:
        columns = ", ".join(self.quote(self.plan.columns[n]) for n in positions)
        binary = self.types is not None
        sql = f"COPY {self.quote(self.plan.table)} ({columns}) FROM STDIN" + (
            " (FORMAT BINARY)" if binary else ""
        )
        if len(positions) != len(self.plan.columns):
            rows = [tuple(row[n] for n in positions) for row in rows]
        with contextlib.ExitStack() as stack:
            # Entered as a with statement would; the end of the COPY (which waits for the
            # server) is left to the function returned, unless the rows fail to go out.
            cursor = stack.enter_context(self.connection.cursor())
            stack.enter_context(self.connection.wrap_database_errors)
            copy = stack.enter_context(cursor.cursor.copy(sql))
            self._send(copy, [self.types[n] for n in positions] if self.types else None, rows)
            end = stack.pop_all().close
        return end

    @staticmethod
    def _send(copy: Any, types: list[str] | None, rows: list[Row]) -> None:
        if types is None:
            deque(map(copy.write_row, rows), maxlen=0)
            return
        copy.set_types(types)
        if _format_row_binary is None:
            deque(map(copy.write_row, rows), maxlen=0)
            return
        # Rows formatted by psycopg's own C row formatter in a loop that stays in C:
        # write_row() costs two Python calls per row, a third of the time of a load of
        # small rows. A block goes out every _COPY_BLOCK_ROWS rows, so the server parses
        # one while the next is formatted; the blocks make the whole binary COPY stream,
        # signature to trailer.
        transformer = copy.formatter.transformer
        buffer = bytearray(_BINARY_SIGNATURE)
        for start in range(0, len(rows), _COPY_BLOCK_ROWS):
            block = rows[start : start + _COPY_BLOCK_ROWS]
            deque(
                map(_format_row_binary, block, repeat(transformer), repeat(buffer)),
                maxlen=0,
            )
            copy.write(buffer)
            buffer = bytearray()
        copy.write(_BINARY_TRAILER)

    def finish(self) -> None:
        if self.plan.foreign_keys:
            # Django's foreign keys are DEFERRABLE INITIALLY DEFERRED: check them now, inside
            # the load's transaction, rather than at a commit that may be far away.
            self.connection.check_constraints(table_names=[self.plan.table])


_MYSQL_ESCAPES = str.maketrans(
    {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x00": "\\0", "\x1a": "\\Z"}
)


def _mysql_text(value: Any) -> str:
    """``value`` as a field of a LOAD DATA file (tab-separated, backslash escapes)."""
    if value is None:
        return "\\N"
    cls = value.__class__
    if cls is str:
        return value.translate(_MYSQL_ESCAPES)  # type: ignore[no-any-return]
    if cls is int:
        return str(value)
    if cls is bool:
        return "1" if value else "0"
    if cls is float:
        return repr(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value).translate(_MYSQL_ESCAPES)


def _mysql_column_text(values: Sequence[Any]) -> Iterable[str]:
    """The fields of a LOAD DATA file for one column's ``values``: C loops for the usual
    columns of one class (ints, strings), :func:`_mysql_text` for any other."""
    classes = set(map(type, values))
    if classes == {int}:
        return map(str, values)
    if classes == {str}:
        return map(str.translate, values, repeat(_MYSQL_ESCAPES))
    return map(_mysql_text, values)


def _mysql_file_text(rows: list[Row]) -> str:
    """``rows`` as the text of a LOAD DATA file: tab between fields, newline after rows."""
    if not rows:
        return ""
    columns = [_mysql_column_text(column) for column in zip(*rows, strict=True)]
    return "\n".join(map("\t".join, zip(*columns, strict=True))) + "\n"


class _MySQLLoader(_Loader):
    def __init__(self, plan: _Plan) -> None:
        super().__init__(plan)
        self.local_infile = self._local_infile()
        self.binary = [
            (field.db_type(self.connection) or "").lower().endswith("blob") for field in plan.fields
        ]

    def _local_infile(self) -> bool:
        # The client must have been opened with local_infile (mysqlclient refuses the file
        # otherwise), and the server must allow it.
        if not self.connection.settings_dict.get("OPTIONS", {}).get("local_infile"):
            return False
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT @@local_infile")
            (value,) = cursor.fetchone()
        return bool(int(value))

    def write(self, positions: list[int], rows: list[Row]) -> None:
        if len(positions) != len(self.plan.columns):
            rows = [tuple(row[n] for n in positions) for row in rows]
        if self.local_infile:
            self._load_data(positions, rows)
        else:
            raw = self.connection.connection
            assert raw is not None
            with self.connection.wrap_database_errors, raw.cursor() as cursor:
                # mysqlclient rewrites this into multi-row INSERTs of up to 64 KiB each.
                cursor.executemany(self.insert_sql(positions), rows)

    def _load_data(self, positions: list[int], rows: list[Row]) -> None:
        targets = []
        sets = []
        for n in positions:
            column = self.quote(self.plan.columns[n])
            if self.binary[n]:
                # Bytes travel as hex: the file's character set must not touch them.
                targets.append(f"@b{n}")
                sets.append(f"{column} = UNHEX(@b{n})")
            else:
                targets.append(column)
        fd, path = tempfile.mkstemp(prefix="bulk_load_", suffix=".tsv")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
                file.write(_mysql_file_text(rows))
            sql = (
                f"LOAD DATA LOCAL INFILE %s INTO TABLE {self.quote(self.plan.table)} "
                "CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' "
                f"LINES TERMINATED BY '\\n' ({', '.join(targets)})"
                + (f" SET {', '.join(sets)}" if sets else "")
            )
            raw = self.connection.connection
            assert raw is not None
            with self.connection.wrap_database_errors, raw.cursor() as cursor:
                cursor.execute(sql, [path])
                loaded = cursor.rowcount
                # LOCAL implies IGNORE: a duplicate key, a missing parent or a value too long
                # is a warning and the row is skipped or cut. Any warning fails the load.
                warnings = []
                if raw.warning_count():
                    cursor.execute("SHOW WARNINGS")
                    warnings = [w for w in cursor.fetchall() if w[0] != "Note"]
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if warnings or loaded != len(rows):
            raise _LoadDataWarning(warnings)


class _LoadDataWarning(DatabaseError):
    """LOAD DATA skipped or changed a row; the rows are replayed to find it."""


_LOADERS: dict[str, type[_Loader]] = {
    "sqlite": _SQLiteLoader,
    "postgresql": _PostgreSQLLoader,
    "mysql": _MySQLLoader,
}


def _locate(
    loader: _Loader, positions: list[int], rows: list[Row], indexes: list[int]
) -> tuple[int, DatabaseError] | None:
    """Insert ``rows`` one at a time until one fails: (its index, the error), or ``None``."""
    connection = loader.connection
    sql = loader.insert_sql(positions)
    with connection.cursor() as cursor:
        for index in indexes:
            row = rows[index]
            try:
                cursor.execute(sql, [row[n] for n in positions])
            except DatabaseError as exc:
                return index, exc
    return None


def _describe(plan: _Plan, error: DatabaseError, where: str) -> DatabaseError:
    """An error of the same class as ``error`` whose message says which row failed."""
    label = plan.model._meta.label
    described = type(error)(f"bulk_load of {label} rolled back: {where} failed: {error}")
    return described


def _pk_of_fk_error(plan: _Plan, error: DatabaseError) -> str:
    """For a deferred foreign key error, the primary key of a row that caused it."""
    # SQLite (Django's check_constraints) names the row's primary key itself.
    match = re.search(r"with primary key '([^']*)' has an invalid foreign key", str(error))
    if match:
        return f"the row with pk {match.group(1)}"
    detail = getattr(getattr(error.__cause__, "diag", None), "message_detail", None) or ""
    match = re.search(r"Key \((\w+)\)=\((.*?)\) is not present", detail)
    if not match:
        return ""
    column, value = match.groups()
    quote = plan.connection.ops.quote_name
    with plan.connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote(plan.pk.column or plan.pk.name)} FROM {quote(plan.table)} "
            f"WHERE {quote(column)} = %s LIMIT 1",
            [value],
        )
        found = cursor.fetchone()
    return f"the row with pk {found[0]}" if found else ""


def bulk_load(
    model_or_queryset: Any,
    objs: Iterable[models.Model],
    *,
    batch_size: int | None = None,
    progress: Progress | None = None,
) -> int:
    """Write unsaved instances through the database's bulk loader; return the row count.

    ``model_or_queryset`` is a model class (written to ``router.db_for_write``), a manager or
    a queryset (written to its ``using()`` database). ``objs`` is any iterable of instances
    of that model, consumed ``batch_size`` (default :data:`DEFAULT_BATCH_SIZE`) at a time, so
    a generator keeps memory flat.
    ``progress(rows_done)`` is called after every batch.

    The rows stored are the ones ``bulk_create`` would store. The whole load is one
    transaction (a savepoint inside an outer one): on any error nothing of it stays, and the
    error, of the class the database raised (``IntegrityError``, ``DataError``, ...), names
    the row (its index in ``objs`` and its pk) where the database lets it be found.
    No signals are sent and nothing is read back (no ``RETURNING``: a ``db_default`` value
    is not set on the instance); each loaded instance is marked saved
    (``_state.adding = False``, ``_state.db`` the alias).

    Raises :class:`~django_snowflake.exceptions.BulkLoadError` (a ``ValueError``) for
    multi-table inheritance, a primary key the database numbers, an object of another class,
    or an instance without a key.
    """
    model, alias = _resolve(model_or_queryset)
    _check_model(model)
    if batch_size is not None and batch_size <= 0:
        raise BulkLoadError(f"bulk_load: batch_size must be positive, not {batch_size}.")
    size = batch_size or DEFAULT_BATCH_SIZE
    connection = connections[alias]
    if connection.vendor not in _LOADERS:
        raise BulkLoadError(
            f"bulk_load has no loader for the {connection.vendor} backend of database "
            f"{alias!r}; use bulk_create()."
        )
    plan = _Plan(model, connection)
    with transaction.atomic(using=alias):
        loader = _LOADERS[connection.vendor](plan)
        load = _Load(loader, alias, progress)
        batches = _batches(objs, size)
        try:
            prepared = load.prepare(next(batches, None))
            while prepared is not None:
                # The next batch is taken before the write begins: making it runs the
                # caller's code, which may query this connection.
                following = next(batches, None)
                load.write(prepared)
                prepared = load.prepare(following)
                load.wait()
        except BaseException:
            load.abandon()  # a COPY left open would refuse the rollback
            raise
        savepoint = _savepoint(alias) if plan.foreign_keys else None
        try:
            loader.finish()
        except DatabaseError as exc:
            # Back to before the check, so the offending row can still be looked up.
            if savepoint is not None:
                transaction.savepoint_rollback(savepoint, using=alias)
            where = _pk_of_fk_error(plan, exc)
            raise _describe(plan, exc, f"the foreign key check of {where or 'its rows'}") from exc
    return load.done


#: A batch ready to write: the index of its first instance, the instances, their rows.
_Prepared = tuple[int, list[models.Model], list[Row]]


class _Load:
    """The batches of one ``bulk_load()``, prepared and written in turn.

    Where preparing a batch stays off the connection (``_Plan.prepares_offline``), the next
    batch is prepared while the server still loads the rows sent, and the end of the write
    is awaited only then: the server and Python work at once instead of by turns.
    """

    def __init__(self, loader: _Loader, alias: str, progress: Progress | None) -> None:
        self.loader = loader
        self.plan = loader.plan
        self.alias = alias
        self.progress = progress
        self.taken = 0
        self.done = 0
        self._end: Callable[[], None] = _loaded
        self._batch: list[models.Model] = []

    def prepare(self, batch: list[models.Model] | None) -> _Prepared | None:
        if batch is None:
            return None
        first, self.taken = self.taken, self.taken + len(batch)
        return first, batch, _prepare(self.plan, batch, first)

    def write(self, prepared: _Prepared) -> None:
        first, batch, rows = prepared
        end = _loaded
        for positions, indexes in _groups(self.plan, rows):
            end()  # one write at a time on a connection
            group = rows if len(indexes) == len(rows) else [rows[i] for i in indexes]
            end = _begin(self.loader, positions, group, rows, indexes, first, self.alias)
        self._end, self._batch = end, batch
        if not self.plan.prepares_offline:
            self.wait()

    def wait(self) -> None:
        """Wait for the batch being loaded, if any, and mark its instances saved."""
        end, batch = self._end, self._batch
        self._end, self._batch = _loaded, []
        end()
        if not batch:
            return
        for state in map(attrgetter("_state"), batch):
            state.adding = False
            state.db = self.alias
        self.done += len(batch)
        if self.progress is not None:
            self.progress(self.done)

    def abandon(self) -> None:
        """End the write of the batch being loaded, if any, without marking it saved."""
        end = self._end
        self._end, self._batch = _loaded, []
        with contextlib.suppress(DatabaseError):
            end()


def _begin(
    loader: _Loader,
    positions: list[int],
    group: list[Row],
    rows: list[Row],
    indexes: Sequence[int],
    first: int,
    alias: str,
) -> Callable[[], None]:
    """Start writing ``group`` in a savepoint; the function returned waits for the end.

    Either raises, if the database refuses a row, an error naming the row.
    """
    savepoint = _savepoint(alias)

    def failed(exc: DatabaseError) -> DatabaseError:
        if savepoint is None:
            return _describe(loader.plan, exc, "a batch")
        # Find the row: roll the batch back, insert its rows one by one, stop at the first
        # failure, and roll that back too (the load's transaction is rolled back by the raise).
        transaction.savepoint_rollback(savepoint, using=alias)
        found = _locate(loader, positions, rows, list(indexes))
        transaction.savepoint_rollback(savepoint, using=alias)
        plan = loader.plan
        if found is None:
            return _describe(plan, exc, "a batch")
        index, error = found
        pk = rows[index][plan.pk_position]
        return _describe(plan, error, f"row {first + index} (pk {pk})")

    def cause(exc: DatabaseError) -> BaseException:
        return exc.__cause__ if isinstance(exc, _LoadDataWarning) and exc.__cause__ else exc

    try:
        end = loader.begin(positions, group)
    except DatabaseError as exc:
        raise failed(exc) from cause(exc)

    def finish() -> None:
        try:
            end()
        except DatabaseError as exc:
            raise failed(exc) from cause(exc)
        if savepoint is not None:
            transaction.savepoint_commit(savepoint, using=alias)

    return finish


def _savepoint(alias: str) -> str | None:
    """A savepoint, or ``None`` where the transaction can have none.

    MariaDB refuses savepoints in a transaction that has touched a non-transactional table,
    which a trigger reading one (SnowflakeAutoField's) counts as: the load then goes on
    without, and an error names the batch rather than the row.
    """
    try:
        # The connection's own savepoint(), which transaction.savepoint() (deprecated in Django
        # 6.1) and its replacement savepoint_create() (new in 6.1) both call.
        return connections[alias].savepoint()
    except DatabaseError:
        if connections[alias].vendor != "mysql":
            raise
        return None
