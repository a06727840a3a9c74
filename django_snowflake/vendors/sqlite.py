"""``django_snowflake_id()`` on SQLite: the process's own generator, on every connection.

Registered on every Django connection (:func:`prepare`), it returns
:func:`django_snowflake.generate` (the process's own worker slot). A connection without it (the
``sqlite3`` shell) fails the INSERT with "unknown function".
"""

from __future__ import annotations

import functools
import re
import time
from typing import Any

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from ..allocators.base import on_allocator_thread
from ..exceptions import SnowflakeError
from .base import FUNCTION, Database, is_database_keyed

# After a failed claim, how long a connection waits before it claims again.
CLAIM_RETRY_SECONDS = 1.0


def _sqlite_snowflake() -> int:
    from .. import generate

    return generate()


@functools.cache
def _database_keyed_tables() -> frozenset[str]:
    """Tables whose key the function may make: SnowflakeAutoField models', and with the
    project-wide switch every auto-created many-to-many table (the migration state builds
    those with ``DEFAULT_AUTO_FIELD``, whatever the app pins)."""
    from django.apps import apps
    from django.conf import settings

    switched = str(getattr(settings, "DEFAULT_AUTO_FIELD", "")).endswith("SnowflakeAutoField")
    return frozenset(
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if is_database_keyed(model._meta.pk) or (switched and model._meta.auto_created)
    )


# Django's INSERT of objects with no field to write: ``("id") VALUES (NULL), (NULL) ...`` on
# SQLite, whose explicit NULL bypasses the column's DEFAULT.
_KEY_ONLY_INSERT = re.compile(r'INSERT INTO "([^"]+)" \("[^"]+"\) VALUES \(NULL\)(?:, \(NULL\))*')


def _claim_now(connection: BaseDatabaseWrapper, *, beginning: bool = False) -> None:
    """Claim the process's worker slot unless it holds one (SQLite).

    SQLite's ``django_snowflake_id()`` is this process's generator, called while the INSERT
    holds the database's one write lock, and the claim of a process's first ID writes
    ``WorkerNode`` on the allocator's own connection: it would wait for that lock, or for the
    shared lock of a transaction that has read, until the busy timeout. So the claim is made
    while nothing is held: before a transaction begins, and before an INSERT outside one. A
    claim that fails before an INSERT (no table before ``migrate``, another writer holding the
    lock past the busy timeout) is tried again before a statement at least a second later,
    so the connection recovers once the cause is gone.
    """
    failed_at = getattr(connection, "_snowflake_claim_failed_at", None)
    if failed_at is not None and time.monotonic() - failed_at < CLAIM_RETRY_SECONDS:
        return
    if on_allocator_thread():
        return  # the allocator's own connection
    from .. import runtime

    generator = runtime._generator
    if generator is not None and generator.lease is None:
        try:
            generator.try_ensure_lease(wait=True)
        except (SnowflakeError, DatabaseError):
            if not beginning:
                connection._snowflake_claim_failed_at = time.monotonic()  # type: ignore[attr-defined]
        else:
            connection._snowflake_claim_failed_at = None  # type: ignore[attr-defined]


def _before_write(connection: BaseDatabaseWrapper, sql: str) -> str:
    """Claim before a transaction begins or before an INSERT into a table whose key the
    function makes outside one (SQLite); return ``sql``, a key-only INSERT given the function
    instead of NULL."""
    if sql.startswith("BEGIN"):
        if _database_keyed_tables():
            _claim_now(connection, beginning=True)
    elif sql.startswith('INSERT INTO "') and sql.split('"', 2)[1] in _database_keyed_tables():
        if not connection.in_atomic_block:
            _claim_now(connection)
        key_only = _KEY_ONLY_INSERT.match(sql)
        if key_only:
            values = key_only.group(0).replace("(NULL)", f"({FUNCTION}())")
            sql = values + sql[key_only.end() :]
    return sql


@functools.cache
def _keyed_cursor_class() -> type[Any]:
    """Django's SQLite cursor, passing each statement through :func:`_before_write`.

    A cursor rather than an entry in ``connection.execute_wrappers``: that list is the
    project's own (Django's tests assert it holds only theirs).
    """
    from django.db.backends.sqlite3.base import SQLiteCursorWrapper

    class SnowflakeCursorWrapper(SQLiteCursorWrapper):
        database: BaseDatabaseWrapper

        def execute(self, query: str, params: Any = None) -> Any:
            return super().execute(_before_write(self.database, query), params)

        def executemany(self, query: str, param_list: Any) -> Any:
            return super().executemany(_before_write(self.database, query), param_list)

    return SnowflakeCursorWrapper


def _keyed_cursors(connection: BaseDatabaseWrapper) -> None:
    """Make ``connection`` (SQLite) create :func:`_keyed_cursor_class` cursors."""

    def create_cursor(name: str | None = None) -> Any:
        cursor = connection.connection.cursor(factory=_keyed_cursor_class())
        cursor.database = connection
        return cursor

    connection.create_cursor = create_cursor  # type: ignore[method-assign]


def prepare(connection: BaseDatabaseWrapper) -> None:
    """Register ``django_snowflake_id()`` on ``connection`` and give it cursors that claim
    before a write (idempotent)."""
    # Whatever the models: the tables are known only once every app is installed (Django's
    # own test runner installs its apps after setup), so they are looked up at each write.
    if "create_cursor" not in vars(connection):
        _keyed_cursors(connection)
    if connection.connection is not None:
        connection.connection.create_function(FUNCTION, 0, _sqlite_snowflake, deterministic=False)
        connection._snowflake_claim_failed_at = None  # type: ignore[attr-defined]


class SQLite(Database):
    """SQLite, the development database: ``django_snowflake_id()`` is the process's generator,
    registered on every connection (:meth:`prepare_connection`); one writer at a time."""

    supported = True

    display_name = "SQLite"
    bulk_loader_class = "django_snowflake.bulk.sqlite.SQLiteLoader"
    now_sql = "SELECT (julianday('now') - 2440587.5) * 86400.0"
    epoch_template = "(julianday({}) - 2440587.5) * 86400.0"

    @classmethod
    def prepare_connection(cls, connection: BaseDatabaseWrapper) -> None:
        prepare(connection)

    def lock_hint(self, error: DatabaseError) -> str:
        if "locked" not in str(error):
            return ""
        return (
            "; SQLite has one writer at a time: if the first ID of this process is generated "
            "inside a transaction that has already used the database, claim the slot before "
            "it (get_generator().ensure_lease(), or CLAIM_ON_READY)"
        )
