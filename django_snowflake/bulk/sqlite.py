"""SQLite's loader: one prepared ``executemany`` per group of rows."""

from __future__ import annotations

import re

from django.db import DatabaseError

from .base import Loader
from .plan import Row


class SQLiteLoader(Loader):
    """One prepared ``executemany`` per group of rows."""

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

    def foreign_key_row(self, error: DatabaseError) -> str:
        # Django's check_constraints names the row's primary key itself.
        match = re.search(r"with primary key '([^']*)' has an invalid foreign key", str(error))
        return f"the row with pk {match.group(1)}" if match else ""
