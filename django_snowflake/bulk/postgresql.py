"""PostgreSQL's loader: ``COPY ... FROM STDIN``, binary where every column's type allows it.

Binary COPY hands each value to psycopg's dumper for the column's type (the types below,
those of django.contrib.postgres included); a table with any other column, or a field that
converts in its own way, goes through text COPY, which takes what a parameter would.
A batch's COPY is left open while ``bulk_load`` prepares the next batch
(``PostgreSQLLoader.begin``).
"""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import Any

from django.db import DatabaseError, models
from django.db.backends.base.base import BaseDatabaseWrapper

from .base import Loader
from .plan import Plan, Row, converts_as_django

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


class PostgreSQLLoader(Loader):
    """``COPY ... FROM STDIN``: binary where :attr:`types` names every column's type,
    text where it is ``None``."""

    def __init__(self, plan: Plan) -> None:
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

        if not converts_as_django(field):
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
                if not converts_as_django(base):
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

    def foreign_key_row(self, error: DatabaseError) -> str:
        # The error's detail names the column and the missing value, not the row: look it up.
        detail = getattr(getattr(error.__cause__, "diag", None), "message_detail", None) or ""
        match = re.search(r"Key \((\w+)\)=\((.*?)\) is not present", detail)
        if not match:
            return ""
        column, value = match.groups()
        plan = self.plan
        quote = self.quote
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote(plan.pk.column or plan.pk.name)} FROM {quote(plan.table)} "
                f"WHERE {quote(column)} = %s LIMIT 1",
                [value],
            )
            found = cursor.fetchone()
        return f"the row with pk {found[0]}" if found else ""
