"""Snowflake IDs made by the database, for every INSERT that leaves the key out.

``SnowflakeAutoField`` keeps ``AutoField``'s semantics: its column's default is the
function ``django_snowflake_id()``, so Django's own inserts (which leave an unset key out and
read it back with ``RETURNING``), raw SQL, ``RunSQL`` data migrations and other services all get
a Snowflake of the project's layout.

- PostgreSQL: a PL/pgSQL function over two sequences. ``counter`` is drawn by every call;
  ``base`` moves only when the IDs fall behind the wall clock, under a session advisory lock
  released at once (never one held to commit). An ID is ``base + counter`` read in layout units
  (time, then sequence), so the logical clock never goes back, whatever the server's clock does.
- MariaDB: a stored function may not be a column ``DEFAULT``, so a ``BEFORE INSERT`` trigger per
  table calls it. The same two parts: a sequence, and the base in a one-row MyISAM table that
  only ever grows. MyISAM is not transactional, so the base is never locked to commit nor
  rolled back, and it takes no part in the caller's transaction: Aria did, and MariaDB then
  refused every ``SAVEPOINT`` (a nested ``atomic()``) after a key was made. (``SETVAL`` on a
  sequence would do too, but takes only literals, and a function may not run dynamic SQL.)
- SQLite: ``django_snowflake_id()`` is registered on every Django connection and returns
  :func:`django_snowflake.generate` (the process's own worker slot). A connection without it
  (the ``sqlite3`` shell) fails the INSERT with "unknown function".

PostgreSQL and MariaDB issue under the highest worker ID of the layout (in ``DATACENTER_ID``),
leased in ``WorkerNode`` for the database itself (host ``(database)``, a lease that never
expires, so no process can claim it) by the package's migration ``0003``. The slot and the
layout are written into the function, so it never reads a table: a test runner's flush of
``WorkerNode`` does not stop it. A layout change is refused by every process
(``LayoutMismatch``: the database's slot carries the old fingerprint), as for any other slot.

The schema editor of every Django connection is extended here, so ``migrate`` and
``sqlmigrate`` emit the same statements: the function before the first table that needs it, the
column ``DEFAULT`` (PostgreSQL, SQLite) or the trigger (MariaDB).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, IntegrityError, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.signals import connection_created
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import StateApps
from django.db.models.functions import Now

from .exceptions import LayoutMismatch, SnowflakeError
from .layout import BitLayout

FUNCTION = "django_snowflake_id"
COUNTER = "django_snowflake_id_counter"
BASE = "django_snowflake_id_base"
# The database's worker slot in WorkerNode.
DATABASE_HOST = "(database)"
DATABASE_LABEL = "database"
LEASE_END = datetime(9999, 12, 31, tzinfo=UTC)
# pg_advisory_lock key of the catch-up: the first 8 bytes of sha1("django_snowflake_id").
PG_LOCK_KEY = int.from_bytes(hashlib.sha1(FUNCTION.encode()).digest()[:8], "big", signed=True)

# Set while the schema editor writes a column definition: only then does a
# SnowflakeAutoField report its database default (see SnowflakeAutoField.has_db_default).
_writing_columns: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "django_snowflake_writing_columns", default=None
)


def column_default_vendor() -> str | None:
    """The vendor whose schema editor is writing column definitions now, else ``None``."""
    return _writing_columns.get()


class DatabaseSnowflake(models.Func):
    """``django_snowflake_id()``: the column default of a ``SnowflakeAutoField``."""

    function = FUNCTION
    template = "%(function)s()"
    allowed_default = True
    output_field = models.BigIntegerField()

    def __init__(self) -> None:
        super().__init__()

    def as_mysql(self, compiler: Any, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        # MariaDB refuses a stored function as a DEFAULT: the column defaults to 0 and the
        # table's trigger replaces a 0 or NULL key. Without a DEFAULT, INSERT ... SELECT
        # that leaves the key out fails before the trigger runs.
        return "0", []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatabaseSnowflake)

    def __hash__(self) -> int:
        return hash(FUNCTION)


def database_slot(layout: BitLayout) -> tuple[int, int]:
    """``(worker_id, datacenter_id)`` of the database's function: the layout's highest worker
    ID, away from the processes (which claim the lowest free one), in ``DATACENTER_ID``."""
    from .conf import get_settings

    return layout.max_worker_id, int(get_settings()["DATACENTER_ID"] or 0)


def install_sql(vendor: str, layout: BitLayout) -> list[str]:
    """The statements that create (or replace) the function on ``vendor``; ``[]`` on SQLite.

    They embed ``layout`` and the database's slot and are idempotent, so every migration that
    creates a Snowflake column may run them first.
    """
    worker, datacenter = database_slot(layout)
    sb = layout.sequence_bits
    fixed = layout.compose(0, worker_id=worker, datacenter_id=datacenter)
    compose = f"((m >> {sb}) << {layout.time_shift}) | {fixed} | (m & {layout.max_sequence})"
    if vendor == "postgresql":
        now_units = (
            f"floor((extract(epoch from clock_timestamp()) * 1000 - {layout.epoch_ms})"
            f" / {layout.time_unit_ms})::bigint"
        )
        return [
            f"CREATE SEQUENCE IF NOT EXISTS {COUNTER} AS bigint MINVALUE 0 START 0",
            f"CREATE SEQUENCE IF NOT EXISTS {BASE} AS bigint MINVALUE 0 START 0",
            f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $snowflake$
-- Layout {layout.fingerprint}. An ID is m = base + counter in layout units: time
-- m >> {sb}, sequence m & {layout.max_sequence}. A value is used only if base did not move
-- while the counter was drawn, so values drawn before a move are below those after it.
DECLARE
    b1 bigint; b2 bigint; n bigint; m bigint; now_u bigint;
BEGIN
    LOOP
        SELECT last_value INTO b1 FROM {BASE};
        n := nextval('{COUNTER}');
        SELECT last_value INTO b2 FROM {BASE};
        CONTINUE WHEN b1 <> b2;
        m := b1 + n;
        now_u := {now_units};
        IF (m >> {sb}) >= now_u THEN
            RETURN {compose};
        END IF;
        -- Behind the wall clock: move base so the next value starts at now_u. A short
        -- session lock keeps two catch-ups from lowering base; it is never held to commit.
        PERFORM pg_advisory_lock({PG_LOCK_KEY});
        BEGIN
            SELECT last_value INTO b1 FROM {BASE};
            SELECT last_value INTO n FROM {COUNTER};
            IF b1 + n < (now_u << {sb}) THEN
                PERFORM setval('{BASE}', (now_u << {sb}) - n);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            PERFORM pg_advisory_unlock({PG_LOCK_KEY});
            RAISE;
        END;
        PERFORM pg_advisory_unlock({PG_LOCK_KEY});
    END LOOP;
END
$snowflake$""",
        ]
    if vendor == "mysql":
        now_units = (
            f"FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 - {layout.epoch_ms})"
            f" / {layout.time_unit_ms})"
        )
        base = f"(SELECT base FROM {BASE} WHERE id = 1)"
        return [
            f"CREATE SEQUENCE IF NOT EXISTS {COUNTER} START WITH 0 MINVALUE 0",
            # Not transactional: the base is read as last written (no snapshot), and its
            # UPDATE locks the table for that statement only.
            f"CREATE TABLE IF NOT EXISTS {BASE} "
            "(id TINYINT NOT NULL PRIMARY KEY, base BIGINT NOT NULL) ENGINE=MyISAM",
            # A base made by an earlier version in Aria keeps its value.
            f"ALTER TABLE {BASE} ENGINE=MyISAM",
            f"INSERT IGNORE INTO {BASE} (id, base) VALUES (1, 0)",
            f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS BIGINT
NOT DETERMINISTIC MODIFIES SQL DATA
COMMENT 'Layout {layout.fingerprint}'
BEGIN
    -- An ID is m = base + counter in layout units: time m >> {sb}, sequence
    -- m & {layout.max_sequence}. A value is used only if base did not move while the
    -- counter was drawn; base only grows (GREATEST, one statement), so no lock is needed.
    DECLARE b1 BIGINT; DECLARE b2 BIGINT; DECLARE n BIGINT;
    DECLARE m BIGINT; DECLARE now_u BIGINT;
    LOOP
        SET b1 = {base};
        SET n = NEXT VALUE FOR {COUNTER};
        SET b2 = {base};
        IF b1 = b2 THEN
            SET m = b1 + n;
            SET now_u = {now_units};
            IF (m >> {sb}) >= now_u THEN
                RETURN {compose};
            END IF;
            SET n = NEXT VALUE FOR {COUNTER};
            UPDATE {BASE} SET base = GREATEST(base, (now_u << {sb}) - n) WHERE id = 1;
        END IF;
    END LOOP;
END""",
        ]
    return []


def trigger_name(table: str) -> str:
    """The MariaDB trigger of ``table``: at most 64 characters, unique per table."""
    name = f"{table}_snowflake_id"
    if len(name) > 64:
        name = f"{table[:40]}_{hashlib.sha1(table.encode()).hexdigest()[:10]}_snowflake_id"
    return name


def create_trigger_sql(editor: BaseDatabaseSchemaEditor, table: str, column: str) -> str:
    """The MariaDB trigger giving ``table.column`` a Snowflake when an INSERT leaves it out.

    An omitted key arrives as NULL or 0; as with ``AUTO_INCREMENT``, both mean "generate".
    """
    q = editor.quote_name
    col = f"NEW.{q(column)}"
    return (
        f"CREATE TRIGGER {q(trigger_name(table))} BEFORE INSERT ON {q(table)} FOR EACH ROW "
        f"BEGIN IF {col} IS NULL OR {col} = 0 THEN SET {col} = {FUNCTION}(); END IF; END"
    )


def drop_trigger_sql(editor: BaseDatabaseSchemaEditor, table: str) -> str:
    return f"DROP TRIGGER IF EXISTS {editor.quote_name(trigger_name(table))}"


# The database's worker slot.


def claim_database_slot(node_model: type[Any], using: str, layout: BitLayout, vendor: str) -> int:
    """Lease the database's worker slot (:func:`database_slot`) for good; return its worker ID.

    The same compare-and-set as a process's claim: insert the row and let the unique
    constraint pick the winner of a race, or take over an expired lease with
    ``UPDATE ... WHERE token = old``, raising the function's logical clock above every time the
    previous holder could have issued. The lease never expires, so no process claims the slot
    afterwards; a slot the database already holds is kept. Raises ``LayoutMismatch`` when the
    table holds slots of another layout, ``SnowflakeError`` when a live process holds the slot.
    """
    worker, datacenter = database_slot(layout)
    nodes = node_model._default_manager.using(using)
    fingerprint = layout.fingerprint
    other = nodes.exclude(layout=fingerprint).values_list("layout", flat=True).first()
    if other is not None:
        raise LayoutMismatch(fingerprint, other)
    now = datetime.now(UTC)
    holder = {
        "host_name": DATABASE_HOST,
        "label": DATABASE_LABEL,
        "process_id": 0,
        "launched_at": now,
        "heartbeat_at": now,
        "lease_expires_at": LEASE_END,
        "released_at": None,
        "layout": fingerprint,
        "token": f"database-{os.urandom(8).hex()}",
    }
    slot = nodes.filter(worker_id=worker, datacenter_id=datacenter)
    for _attempt in range(100):
        row = slot.first()
        if row is None:
            try:
                with transaction.atomic(using=using):
                    nodes.create(
                        worker_id=worker, datacenter_id=datacenter, last_timestamp=0, **holder
                    )
            except IntegrityError:
                continue  # a process inserted this slot first: look again
            return worker
        if row.host_name == DATABASE_HOST and row.released_at is None:
            return worker
        if slot.filter(pk=row.pk, token=row.token, lease_expires_at__lt=Now()).update(**holder):
            expired_ms = int(row.lease_expires_at.timestamp() * 1000)
            floor = max(row.last_timestamp, layout.to_units(expired_ms)) + 1
            raise_floor(using, vendor, layout, floor)
            return worker
        if slot.filter(pk=row.pk, token=row.token).exists():
            raise SnowflakeError(
                f"Worker slot {worker}/{datacenter} is reserved for the database's Snowflake "
                f"function, but a live process ({row.host_name}:{row.process_id}) holds it. "
                "Stop that process or wait for its lease to expire, then migrate again."
            )
    raise SnowflakeError(f"Could not lease worker slot {worker}/{datacenter} for the database.")


def raise_floor(using: str, vendor: str, layout: BitLayout, units: int) -> None:
    """Make the database's next ID carry a time of at least ``units``."""
    from django.db import connections

    target = units << layout.sequence_bits
    with connections[using].cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(
                f"SELECT setval('{BASE}', GREATEST(last_value, %s - "
                f"(SELECT last_value FROM {COUNTER}))) FROM {BASE}",
                [target],
            )
        elif vendor == "mysql":
            cursor.execute(
                f"UPDATE {BASE} SET base = GREATEST(base, %s - (NEXT VALUE FOR {COUNTER})) "
                "WHERE id = 1",
                [target],
            )


def _claim_for_migration(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from .conf import get_layout

    connection = schema_editor.connection
    if connection.vendor not in ("postgresql", "mysql"):
        return  # SQLite's function uses the process's own slot
    node = apps.get_model("django_snowflake", "WorkerNode")
    claim_database_slot(node, connection.alias, get_layout(), connection.vendor)


class InstallDatabaseFunction(Operation):
    """Create ``django_snowflake_id()`` (and its sequences) for the project's layout.

    Reversing keeps the function: columns may still default to it.
    """

    reduces_to_sql = True
    reversible = True

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: Any,
        to_state: Any,
    ) -> None:
        from .conf import get_layout

        for statement in install_sql(schema_editor.connection.vendor, get_layout()):
            schema_editor.execute(statement, params=None)

    def database_backwards(self, *args: Any) -> None:
        pass  # the function stays: columns may still default to it

    def describe(self) -> str:
        return "Install the database's Snowflake function django_snowflake_id()"


def claim_operation() -> Any:
    """The migration operation that leases the database's worker slot."""
    from django.db.migrations import RunPython

    return RunPython(_claim_for_migration, RunPython.noop, elidable=False)


# The schema editor of every connection.


def _is_database_keyed(field: Any) -> bool:
    # Only SnowflakeAutoField has the attribute; fields.py imports this module, not back.
    return getattr(field, "has_database_default", False) is True


class SnowflakeSchemaEditorMixin:
    """Writes the function, the column defaults and (MariaDB) the triggers of
    ``SnowflakeAutoField`` columns, in ``migrate`` and ``sqlmigrate`` alike."""

    connection: BaseDatabaseWrapper
    _snowflake_installed = False

    @contextmanager
    def _snowflake_columns(self) -> Iterator[None]:
        token = _writing_columns.set(self.connection.vendor)
        try:
            yield
        finally:
            _writing_columns.reset(token)

    def _snowflake_install(self, *fields: Any) -> None:
        if self._snowflake_installed or not any(_is_database_keyed(f) for f in fields):
            return
        from .conf import get_layout

        self._snowflake_installed = True
        for statement in install_sql(self.connection.vendor, get_layout()):
            self.execute(statement, params=None)  # type: ignore[attr-defined]

    def _snowflake_trigger(self, model: Any, old: Any, new: Any) -> None:
        if self.connection.vendor != "mysql":
            return
        table = model._meta.db_table
        if _is_database_keyed(old) and (not _is_database_keyed(new) or old.column != new.column):
            self.execute(drop_trigger_sql(self, table))  # type: ignore[attr-defined, arg-type]
        if _is_database_keyed(new) and (not _is_database_keyed(old) or old.column != new.column):
            self.execute(create_trigger_sql(self, table, new.column))  # type: ignore[attr-defined, arg-type]

    def column_sql(self, model: Any, field: Any, include_default: bool = False) -> Any:
        with self._snowflake_columns():
            return super().column_sql(model, field, include_default)  # type: ignore[misc]

    def create_model(self, model: Any) -> None:
        self._snowflake_install(model._meta.pk)
        with self._snowflake_columns():
            super().create_model(model)  # type: ignore[misc]
        self._snowflake_trigger(model, None, model._meta.pk)

    def add_field(self, model: Any, field: Any) -> None:
        self._snowflake_install(field)
        with self._snowflake_columns():
            super().add_field(model, field)  # type: ignore[misc]
        self._snowflake_trigger(model, None, field)

    def alter_field(self, model: Any, old_field: Any, new_field: Any, strict: bool = False) -> None:
        self._snowflake_install(new_field)
        with self._snowflake_columns():
            super().alter_field(model, old_field, new_field, strict)  # type: ignore[misc]
        self._snowflake_trigger(model, old_field, new_field)

    def _set_field_new_type(self, field: Any, new_type: str) -> Any:  # MySQL, MariaDB
        # MySQL's editor keeps the old column's DEFAULT when it changes the type; an
        # AUTO_INCREMENT column (migrating back to an AutoField) may have none.
        if _is_database_keyed(field) and "AUTO_INCREMENT" in new_type.upper():
            token = _writing_columns.set(None)
            try:
                return super()._set_field_new_type(field, new_type)  # type: ignore[misc]
            finally:
                _writing_columns.reset(token)
        return super()._set_field_new_type(field, new_type)  # type: ignore[misc]

    def _remake_table(self, *args: Any, **kwargs: Any) -> None:  # SQLite
        with self._snowflake_columns():
            super()._remake_table(*args, **kwargs)  # type: ignore[misc]


_editor_classes: dict[type[Any], type[Any]] = {}


def schema_editor_class(base: type[Any]) -> type[Any]:
    """``base`` extended with :class:`SnowflakeSchemaEditorMixin` (one class per base)."""
    if issubclass(base, SnowflakeSchemaEditorMixin):
        return base
    if base not in _editor_classes:
        _editor_classes[base] = type(base.__name__, (SnowflakeSchemaEditorMixin, base), {})
    return _editor_classes[base]


def _sqlite_snowflake() -> int:
    from . import generate

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
        if _is_database_keyed(model._meta.pk) or (switched and model._meta.auto_created)
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
    claim that fails before an INSERT (no table before ``migrate``) is not tried again on
    that connection; the function raises if it needs an ID.
    """
    if getattr(connection, "_snowflake_claim_failed", False):
        return
    if threading.current_thread().name.startswith("snowflake-"):
        return  # the allocator's own connection
    from . import runtime

    generator = runtime._generator
    if generator is not None and generator.lease is None:
        try:
            generator.ensure_lease()
        except (SnowflakeError, DatabaseError):
            if not beginning:
                connection._snowflake_claim_failed = True  # type: ignore[attr-defined]


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


def prepare_connection(connection: BaseDatabaseWrapper) -> None:
    """Extend ``connection``'s schema editor; on SQLite, register ``django_snowflake_id()``."""
    if connection.vendor not in ("postgresql", "mysql", "sqlite"):
        return
    connection.SchemaEditorClass = schema_editor_class(type(connection).SchemaEditorClass)
    if connection.vendor != "sqlite":
        return
    # Whatever the models: the tables are known only once every app is installed (Django's
    # own test runner installs its apps after setup), so they are looked up at each write.
    if "create_cursor" not in vars(connection):
        _keyed_cursors(connection)
    if connection.connection is not None:
        connection.connection.create_function(FUNCTION, 0, _sqlite_snowflake, deterministic=False)
        connection._snowflake_claim_failed = False  # type: ignore[attr-defined]


def _on_connection_created(
    sender: object, connection: BaseDatabaseWrapper, **kwargs: object
) -> None:
    prepare_connection(connection)


def install_connection_hooks() -> None:
    """Prepare every Django connection, open or opened later (idempotent)."""
    from django.db import connections

    connection_created.connect(_on_connection_created, dispatch_uid="django_snowflake_keys")
    # The schema editor is chosen before a connection may be opened (sqlmigrate).
    for connection in connections.all():
        prepare_connection(connection)
