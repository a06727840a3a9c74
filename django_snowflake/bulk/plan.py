"""What a load writes: the model's columns, each value's conversion, the rows of a batch.

The values are the ones ``bulk_create`` would send: each field's ``pre_save(obj, add=True)``
then ``get_db_prep_save()``, defaults applied by ``Model.__init__``, ``db_default`` left to
the database, foreign keys by their ``_id``. A :class:`Plan` is worked out once per load;
:func:`prepare` turns each batch of instances into rows, :func:`groups` splits them by the
columns they send. Nothing here depends on the database's kind.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter, itemgetter
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import DatabaseDefault
from django.db.models.fields.related import ForeignObject

from .. import generate
from ..exceptions import BulkLoadError
from ..fields import SnowflakeAutoField, SnowflakeField

#: A row as the loaders take it: one value per column of :attr:`Plan.columns`.
Row = tuple[Any, ...]

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


def converts_as_django(field: models.Field[Any, Any]) -> bool:
    """Whether ``field`` converts values with Django's (or this package's) own methods.

    Such a conversion stays off the connection (:attr:`Plan.prepares_offline`).
    Binary COPY hands each value to psycopg's dumper for the column's type, which takes only
    the Python class Django's conversion gives; a field converting in its own way may give
    anything the text form of a parameter would take, so its table goes through text COPY.
    """
    for name in ("get_db_prep_save", "get_db_prep_value", "get_prep_value"):
        module = getattr(type(field), name).__module__
        if not module.startswith(("django.", "django_snowflake.")):
            return False
    return True


class Plan:
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
        # prepared while the server still loads the one before (see load._Load).
        self.prepares_offline = all(
            converts_as_django(field) and (_is_pre_save_plain(field) or _is_pre_save_djangos(field))
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


def check_model(model: type[models.Model]) -> None:
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


def prepare(plan: Plan, batch: list[models.Model], first: int) -> list[Row]:
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


def groups(plan: Plan, rows: list[Row]) -> list[tuple[list[int], list[int]]]:
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
