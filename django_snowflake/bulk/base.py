"""The loader interface: what each database's loader does for ``bulk_load``.

One subclass per database, each in a module of its own beside this one (``postgresql``,
``mysql``, ``sqlite``), as Django's backends each implement ``BaseDatabaseOperations``.
``bulk_load`` (in ``load``) drives a loader and never asks which database it is.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import DatabaseError

from .plan import Plan, Row


def loaded() -> None:
    """The end of a write that had nothing left to wait for."""


class Loader:
    """Writes groups of prepared rows to one table; one per database.

    A loader is made inside the load's transaction, once per load, from the load's
    :class:`~django_snowflake.bulk.plan.Plan`. ``bulk_load`` calls :meth:`begin` (or
    :meth:`write`) for each group of rows, with the positions of the columns the group
    sends, each time in a savepoint of its own; :meth:`insert_sql` once a group fails, to
    insert its rows one by one and find the row the database refused; and :meth:`finish`
    once after the last group. A database error raised by any of them rolls the whole
    load back.
    """

    #: Whether the load goes on without savepoints where the database refuses one: an
    #: error then names the batch rather than the row. ``False``: the refusal fails the
    #: load.
    savepoints_optional = False

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.connection = plan.connection
        self.quote = self.connection.ops.quote_name

    def write(self, positions: list[int], rows: list[Row]) -> None:
        """Write ``rows``, each value at ``positions`` of its row, to those columns."""
        raise NotImplementedError

    def begin(self, positions: list[int], rows: list[Row]) -> Callable[[], None]:
        """Send ``rows``; the function returned waits until the database has loaded them.

        A loader whose server goes on loading after the last row is sent (PostgreSQL's
        COPY) returns before the server is done; the others write at once.
        """
        self.write(positions, rows)
        return loaded

    def insert_sql(self, positions: list[int]) -> str:
        """A one-row ``INSERT`` of the columns at ``positions``, with ``%s`` placeholders."""
        columns = ", ".join(self.quote(self.plan.columns[n]) for n in positions)
        placeholders = ", ".join(["%s"] * len(positions))
        return f"INSERT INTO {self.quote(self.plan.table)} ({columns}) VALUES ({placeholders})"

    def finish(self) -> None:
        """Checks that wait for the end of the load (deferred foreign keys)."""

    def foreign_key_row(self, error: DatabaseError) -> str:
        """For an error of :meth:`finish`'s check, a row that caused it ("the row with pk
        12"), or ``""`` where the database does not say."""
        return ""
