"""MariaDB's and MySQL's loader: ``LOAD DATA LOCAL INFILE``, else a multi-row ``INSERT``.

``LOAD DATA LOCAL`` needs both the client (the connection's ``local_infile`` option) and the
server (``@@local_infile``) to allow it; the rows go through a temporary tab-separated file.
Otherwise mysqlclient's ``executemany`` sends them as multi-row ``INSERT`` statements.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import tempfile
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

from django.db import DatabaseError

from .base import Loader
from .plan import Plan, Row

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


class MySQLLoader(Loader):
    """``LOAD DATA LOCAL INFILE`` where client and server allow it (:attr:`local_infile`),
    else multi-row ``INSERT``."""

    # MariaDB refuses savepoints in a transaction that has touched a non-transactional
    # table, which a trigger reading one (SnowflakeAutoField's) counts as: the load then goes
    # on without, and an error names the batch rather than the row.
    savepoints_optional = True

    def __init__(self, plan: Plan) -> None:
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
