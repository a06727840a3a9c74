"""Snowflake IDs made by the database, for every INSERT that leaves the key out.

Where a key is made is decided here, for every database (docs/architecture.rst):

- Django's own inserts into a table keyed by ``SnowflakeAutoField`` or ``SnowflakeField``
  carry a key this process made from its leased worker slot
  (:meth:`~django_snowflake.fields.SnowflakeAutoField.get_pk_value_on_save`, or the field's
  default): fencing, failover incarnations and a slot unique across every database of the ID
  space come with the process's lease.
- An INSERT that leaves the key out (raw SQL, another service, a ``RunSQL`` data migration, the
  auto-created many-to-many tables of apps that pin ``AutoField``, whose tables the migration
  state builds with the project's ``DEFAULT_AUTO_FIELD``) gets one from the database: the
  column's ``DEFAULT``, ``django_snowflake_id()`` on PostgreSQL and SQLite; on MariaDB/MySQL
  an expression over one sequence of the database, which the processes' heartbeats move with
  the clock (a stored function may not be a column default there, and a trigger would tax
  every INSERT, Django's own too), or, with ``SNOWFLAKE["MARIADB_KEYS"] = "trigger"`` and on
  Galera nodes, a ``BEFORE INSERT`` trigger calling the function (:mod:`.vendors.mysql`).

The function of each server database issues under **a slot of its own**
(:mod:`django_snowflake.database_slots`). The slot is written into the function, so it reads
no table to issue; a database whose function has no slot (migrated before the coordination
database had its table) refuses every key with an error saying what to run, until ``migrate``
runs on it again; ``check --database`` says so too. Each database's function is in a module of
its own, :mod:`django_snowflake.vendors` (PostgreSQL, MariaDB/MySQL and its Galera variant,
SQLite), with the same names in each.

The schema editor of every Django connection is extended here, so ``migrate`` and
``sqlmigrate`` emit the same statements: the function before the first table that needs it
(with migrations and without: ``--nomigrations`` test runs create tables through the same
editor), then what each keyed column needs (its ``DEFAULT``; MariaDB's trigger). The migration
operations are in :mod:`django_snowflake.operations`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.signals import connection_created

from .database_slots import database_label, lease_database_slot
from .vendors import (
    SERVERS,
    function_slot,
    galera,
    installed_comment,
    mysql,
    own_sql,
    postgresql,
    sqlite,
)
from .vendors.base import FUNCTION, is_database_keyed

# Set while the schema editor writes a column definition: only then does a Snowflake primary
# key report its database default (see fields._DatabaseKeyDefault).
_writing_columns: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "django_snowflake_writing_columns", default=None
)


# What a MariaDB key column defaults to while its editor writes it (see key_default()): asked
# only when a keyed column is written, so that an editor that writes none leases no slot.
_mysql_key_default: contextvars.ContextVar[Callable[[], str]] = contextvars.ContextVar(
    "django_snowflake_mysql_key_default", default=lambda: "0"
)


def column_default_vendor() -> str | None:
    """The vendor whose schema editor is writing column definitions now, else ``None``."""
    return _writing_columns.get()


def keys_path(connection: BaseDatabaseWrapper) -> str:
    """Which path an INSERT that leaves the key out takes on MariaDB database ``connection``:
    ``"default"``, the column's default over the key sequence (a Galera node's own), or
    ``"trigger"``, the strict path (``SNOWFLAKE["MARIADB_KEYS"]``)."""
    return mysql.keys()


def key_default(connection: BaseDatabaseWrapper) -> str:
    """The ``DEFAULT`` of a keyed column on MariaDB database ``connection``: the key expression
    under its slot (leased in the coordination database; on a Galera cluster, each node's
    under its own), or 0 on the trigger path."""
    from .conf import get_layout

    if keys_path(connection) == mysql.KEYS_TRIGGER:
        return "0"
    layout = get_layout()
    if galera.node_name(connection) is not None:
        return mysql.galera_key_expression(layout, galera.key_slots(connection, layout))
    return mysql.key_expression(layout, lease_database_slot(connection.alias, layout))


class DatabaseSnowflake(models.Func):
    """``django_snowflake_id()``: the column default of a Snowflake primary key."""

    function = FUNCTION
    template = "%(function)s()"
    allowed_default = True
    output_field = models.BigIntegerField()

    def __init__(self) -> None:
        super().__init__()

    def as_postgresql(self, compiler: Any, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        # The database's one function, whatever schema the table is made in (a tenant's).
        return f"{postgresql.qualified(FUNCTION)}()", []

    def as_mysql(self, compiler: Any, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        # MariaDB refuses a stored function as a DEFAULT: the key expression over the
        # database's sequence, or (the trigger path) 0, which the table's trigger replaces,
        # as a NULL key. Without a DEFAULT, INSERT ... SELECT that leaves the key out fails
        # before the trigger runs.
        return _mysql_key_default.get()(), []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatabaseSnowflake)

    def __hash__(self) -> int:
        return hash(FUNCTION)


def function_sql(connection: BaseDatabaseWrapper) -> list[str]:
    """The statements installing the function on ``connection`` under its leased slot; on a
    Galera node, that node's own (:func:`install_function` installs the other nodes')."""
    from .conf import get_layout

    if connection.vendor not in SERVERS:
        return []
    layout = get_layout()
    node = galera.node_name(connection) if connection.vendor == "mysql" else None
    if node is not None and keys_path(connection) == mysql.KEYS_DEFAULT:
        return galera.default_sql(connection, layout)
    statements = own_sql(connection, layout, node)
    if node is not None and "node=" not in (installed_comment(connection) or ""):
        # The first install on the cluster: every node gets a function that refuses, saying
        # what to run, before the nodes migrate reaches get their own.
        statements.insert(0, galera.refusal_statement(connection.alias, layout))
    return statements


def own_label(alias: str) -> str:
    """The ``WorkerNode.label`` the function of database ``alias`` should issue under: its own,
    or its Galera node's."""
    connection = connections[alias]
    node = galera.node_name(connection) if connection.vendor == "mysql" else None
    return database_label(alias, node)


def function_report(alias: str) -> dict[str, Any] | None:
    """Database ``alias``'s function as seen from outside: ``where`` it lives (PostgreSQL: its
    schema; Galera: the node; MariaDB: the database), its ``slot`` (``"W/D"``, ``None`` when it
    refuses), and ``behind_ms``, how far the time of its last key is behind the server's clock
    (negative: ahead, a burst's lead; ``None`` on MariaDB's trigger path, whose clock is spread
    over sequences of digits). ``installed`` is ``False`` before ``migrate``; ``error`` says why the database
    could not be read. ``None`` for SQLite, whose function is the process's generator."""
    from .conf import get_layout

    connection = connections[alias]
    if connection.vendor not in SERVERS:
        return None
    report: dict[str, Any] = {"database": alias, "installed": False, "where": None}
    report.update(slot=None, behind_ms=None)
    try:
        exists, slot = function_slot(connection)
        report["installed"] = exists
        node = galera.node_name(connection) if connection.vendor == "mysql" else None
        if connection.vendor == "postgresql":
            report["where"] = f"schema {postgresql.schema()}"
        else:
            name = connection.settings_dict["NAME"]
            report["where"] = f"node {node}" if node else f"database {name}"
        if exists and slot is not None:
            report["slot"] = f"{slot[0]}/{slot[1]}"
            clock = SERVERS[connection.vendor].clock_sql(get_layout(), node)
            with connection.cursor() as cursor:
                cursor.execute(clock)
                row = cursor.fetchone()
            report["behind_ms"] = None if row is None else int(row[0])
    except DatabaseError as exc:
        report["error"] = str(exc).strip()
    return report


def install_function(editor: BaseDatabaseSchemaEditor) -> None:
    """Install the function through ``editor``; on a Galera node, on every node ``migrate``
    can reach (:func:`galera.install`)."""
    statements = function_sql(editor.connection)
    if galera.LOCAL in statements:
        galera.install(editor, statements)
    else:
        for statement in statements:
            editor.execute(statement, params=None)


def switch_keys(editor: BaseDatabaseSchemaEditor) -> None:
    """Put MariaDB database ``editor.connection`` on the path :func:`keys_path` names: the
    function and every keyed column's default and trigger, under the database's slot.

    Found through the catalog (columns defaulting to our sequences, tables with our trigger),
    so that it serves ``post_migrate`` too, when the setting changed. The order keeps one
    sequence issuing at a time: towards the column default, the function first (the triggers
    that remain until their table is done call it, and it draws the key sequence); towards
    the trigger, the tables first (their triggers call the function, still over the key
    sequence), then the function, started above that sequence.
    """
    connection = editor.connection
    with connection.cursor() as cursor:
        cursor.execute(mysql.KEYED_COLUMNS_SQL, mysql.KEYED_COLUMNS_PARAMS)
        columns = mysql.keyed_columns(cursor.fetchall())
    options = editor._snowflake_key_options()  # type: ignore[attr-defined]

    def tables() -> None:
        for table, column in columns:
            for statement in mysql.key_default_sql(editor.quote_name, table, column, **options):
                editor.execute(statement, params=None)

    if options["default"] == "0":
        tables()
        install_function(editor)
    else:
        install_function(editor)
        tables()


class SnowflakeSchemaEditorMixin:
    """Writes the function, the column defaults and (MariaDB) the triggers of Snowflake
    primary keys, in ``migrate`` and ``sqlmigrate`` alike."""

    connection: BaseDatabaseWrapper
    _snowflake_installed = False
    _snowflake_key_default: str | None = None

    def _snowflake_key_options(self) -> dict[str, str]:
        """What the vendor's key SQL needs besides the table: MariaDB's column default."""
        if self.connection.vendor != "mysql":
            return {}
        if self._snowflake_key_default is None:
            self._snowflake_key_default = key_default(self.connection)
        return {"default": self._snowflake_key_default}

    @contextmanager
    def _snowflake_columns(self) -> Iterator[None]:
        token = _writing_columns.set(self.connection.vendor)
        default = _mysql_key_default.set(lambda: self._snowflake_key_options().get("default", "0"))
        try:
            yield
        finally:
            _mysql_key_default.reset(default)
            _writing_columns.reset(token)

    def _snowflake_install(self, *fields: Any) -> None:
        if self._snowflake_installed or not any(is_database_keyed(f) for f in fields):
            return
        self._snowflake_installed = True
        install_function(self)  # type: ignore[arg-type]

    def _snowflake_default(self, model: Any, pk: Any) -> None:
        """Give the existing table of ``model`` the key default (see AddDatabaseDefaults).

        Not on SQLite, which alters a default only by copying the table and every table whose
        foreign keys point at it (the development database; its function is the process's
        generator anyway): tables made there before 0.2 keep no default.
        """
        table, column = model._meta.db_table, pk.column
        if not self._snowflake_plain_bigint(table, column):
            return
        self._snowflake_install(pk)
        vendor = SERVERS[self.connection.vendor]
        options = self._snowflake_key_options()
        for statement in vendor.key_default_sql(self.quote_name, table, column, **options):  # type: ignore[attr-defined]
            self.execute(statement)  # type: ignore[attr-defined]

    def _snowflake_plain_bigint(self, table: str, column: str) -> bool:
        """Whether ``table.column`` is a bigint with no identity or auto-increment of its own
        (a column a migration made for an AutoField keeps its sequence: the project has not
        migrated it to a Snowflake key yet, docs/migrating.rst)."""
        vendor = SERVERS.get(self.connection.vendor)
        if vendor is None:
            return False  # SQLite: see _snowflake_default
        with self.connection.cursor() as cursor:
            cursor.execute(vendor.COLUMN_SQL, [table, column])
            row = cursor.fetchone()
        # No such column: nothing of ours to give a default.
        return row is not None and bool(vendor.plain_bigint(row))

    def _snowflake_trigger(self, model: Any, old: Any, new: Any) -> None:
        vendor = SERVERS.get(self.connection.vendor)
        if vendor is None or not (is_database_keyed(old) or is_database_keyed(new)):
            return
        statements = vendor.key_changed_sql(
            self.quote_name,  # type: ignore[attr-defined]
            model._meta.db_table,
            old.column if is_database_keyed(old) else None,
            new.column if is_database_keyed(new) else None,
            **self._snowflake_key_options(),
        )
        for statement in statements:
            self.execute(statement)  # type: ignore[attr-defined]

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
        if is_database_keyed(field) and "AUTO_INCREMENT" in new_type.upper():
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


def prepare_connection(connection: BaseDatabaseWrapper) -> None:
    """Extend ``connection``'s schema editor; on SQLite, register ``django_snowflake_id()``."""
    if connection.vendor not in ("postgresql", "mysql", "sqlite"):
        return
    connection.SchemaEditorClass = schema_editor_class(type(connection).SchemaEditorClass)
    if connection.vendor == "sqlite":
        sqlite.prepare(connection)


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


def move_database_clocks() -> bool:
    """Move the key sequence of every MariaDB database on the column-default path forward
    with the clock, or past what an old primary may have issued after a failover
    (:func:`.vendors.mysql.move_clock`): each process's heartbeat calls it once a second.

    Returns whether a database could not be reached (the heartbeat then tries again sooner:
    after a failover, raw INSERTs on the new primary wait for this move). Each database is
    reached on this thread's own connection, closed afterwards."""
    from django.db import DatabaseError

    from .conf import get_layout
    from .vendors.base import hold_units, lead_units

    layout = get_layout()
    failed = False
    for connection in connections.all(initialized_only=False):
        if connection.vendor != "mysql":
            continue
        try:
            node = galera.node_name(connection)
            with connection.cursor() as cursor:
                mysql.move_clock(
                    cursor,
                    layout,
                    lead_units=lead_units(layout),
                    hold_units=hold_units(layout),
                    node=node,
                )
        except DatabaseError:
            failed = True
        finally:
            connection.close()
    return failed
