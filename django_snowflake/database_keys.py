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
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.signals import connection_created

from . import signals
from .vendors import database, database_class
from .vendors.base import FUNCTION, is_database_keyed

logger = logging.getLogger("django_snowflake")

# Set while the schema editor writes a column definition (to the alias of its database): only
# then does a Snowflake primary key report its database default (see fields._DatabaseKeyDefault).
_writing_columns: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "django_snowflake_writing_columns", default=None
)


# What a key column defaults to while its editor writes it (Database.key_default()): asked
# only when a keyed column is written, so that an editor that writes none leases no slot.
_key_default: contextvars.ContextVar[Callable[[], str | None] | None] = contextvars.ContextVar(
    "django_snowflake_key_default", default=None
)


def column_default_vendor() -> str | None:
    """The alias of the database whose schema editor is writing column definitions now, else
    ``None``."""
    return _writing_columns.get()


class DatabaseSnowflake(models.Func):
    """``django_snowflake_id()``: the column default of a Snowflake primary key."""

    function = FUNCTION
    template = "%(function)s()"
    allowed_default = True
    output_field = models.BigIntegerField()

    def __init__(self) -> None:
        super().__init__()

    def as_sql(  # type: ignore[override]
        self, compiler: Any, connection: BaseDatabaseWrapper, **extra: Any
    ) -> Any:
        # PostgreSQL: the database's one function, whatever schema the table is made in (a
        # tenant's); MariaDB: the key expression (a stored function may not be a DEFAULT).
        return database(connection).column_default_sql(_key_default.get()), []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatabaseSnowflake)

    def __hash__(self) -> int:
        return hash(FUNCTION)


def own_label(alias: str) -> str:
    """The ``WorkerNode.label`` the function of database ``alias`` should issue under: its own,
    or its Galera node's."""
    return database(connections[alias]).own_label()


def function_report(alias: str) -> dict[str, Any] | None:
    """Database ``alias``'s function as seen from outside
    (:meth:`~django_snowflake.vendors.base.Database.function_report`); ``None`` for SQLite,
    whose function is the process's generator."""
    return database(connections[alias]).function_report()


def install_function(editor: BaseDatabaseSchemaEditor) -> None:
    """Install the function through ``editor``; on a Galera node, on every node ``migrate``
    can reach."""
    database(editor.connection).install(editor)


class SnowflakeSchemaEditorMixin:
    """Writes the function, the column defaults and (MariaDB) the triggers of Snowflake
    primary keys, in ``migrate`` and ``sqlmigrate`` alike."""

    connection: BaseDatabaseWrapper
    _snowflake_installed = False
    _snowflake_key_default_value: str | None = None

    def _snowflake_key_default(self) -> str | None:
        """The database's :meth:`~.vendors.base.Database.key_default`, asked once per editor."""
        if self._snowflake_key_default_value is None:
            self._snowflake_key_default_value = database(self.connection).key_default()
        return self._snowflake_key_default_value

    @contextmanager
    def _snowflake_columns(self) -> Iterator[None]:
        token = _writing_columns.set(self.connection.alias)
        default = _key_default.set(self._snowflake_key_default)
        try:
            yield
        finally:
            _key_default.reset(default)
            _writing_columns.reset(token)

    def _snowflake_install(self, *fields: Any) -> None:
        if self._snowflake_installed or not any(is_database_keyed(f) for f in fields):
            return
        self._snowflake_installed = True
        install_function(self)  # type: ignore[arg-type]

    def _snowflake_default(self, model: Any, pk: Any) -> None:
        """Give the existing table of ``model`` the key default (see AddDatabaseDefaults).

        Only where the column is a plain bigint (a column a migration made for an AutoField
        keeps its sequence: the project has not migrated it to a Snowflake key yet,
        docs/migrating.rst). Not on SQLite, which alters a default only by copying the table
        and every table whose foreign keys point at it (the development database; its function
        is the process's generator anyway): tables made there before 0.2 keep no default.
        """
        table, column = model._meta.db_table, pk.column
        keys = database(self.connection)
        if not keys.plain_bigint(table, column):
            return
        self._snowflake_install(pk)
        default = self._snowflake_key_default()
        for statement in keys.key_default_sql(self.quote_name, table, column, default):  # type: ignore[attr-defined]
            self.execute(statement)  # type: ignore[attr-defined]

    def _snowflake_trigger(self, model: Any, old: Any, new: Any) -> None:
        if not (is_database_keyed(old) or is_database_keyed(new)):
            return
        statements = database(self.connection).key_changed_sql(
            self.quote_name,  # type: ignore[attr-defined]
            model._meta.db_table,
            old.column if is_database_keyed(old) else None,
            new.column if is_database_keyed(new) else None,
            self._snowflake_key_default(),
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
    """Extend ``connection``'s schema editor and make it ready for keys (SQLite registers
    ``django_snowflake_id()``); nothing on a database the package does not know."""
    keys = database_class(connection)
    if not keys.supported:
        return
    connection.SchemaEditorClass = schema_editor_class(type(connection).SchemaEditorClass)
    keys.prepare_connection(connection)


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
    """Move the key clock of every database whose clock the heartbeats move (MariaDB's column
    default) forward with the clock, or past what an old primary may have issued after a
    failover (:meth:`~.vendors.base.Database.move_clock`): each process's heartbeat calls it
    once a second.

    Returns whether a database could not be reached (the heartbeat then tries again sooner:
    after a failover, raw INSERTs on the new primary wait for this move). Each database is
    reached on this thread's own connection, closed afterwards."""
    from .conf import get_layout

    layout = get_layout()
    failed = False
    for connection in connections.all(initialized_only=False):
        if not database_class(connection).moves_clock:
            continue
        alias = connection.alias
        try:
            if how := database(connection).move_clock(layout):
                signals.database_clock_moved.send(database_class(connection), database=alias, how=how)  # fmt: skip
            if _clock_errors.pop(alias, None) is not None:
                logger.warning("The key clock of database %r moves again", alias)
        except DatabaseError as exc:
            grants = _missing_grants(connection)
            if not grants:
                failed = True  # an outage: try again sooner; a missing grant stays missing
            _clock_error(alias, exc, grants)
        finally:
            connection.close()
    return failed


#: The error last logged for each database whose key clock could not be moved: logged once,
#: not at every beat, until a move succeeds.
_clock_errors: dict[str, str] = {}


def _missing_grants(connection: BaseDatabaseWrapper) -> list[str]:
    try:
        return database(connection).missing_grants()
    except DatabaseError:
        return []


def _clock_error(alias: str, error: DatabaseError, grants: list[str]) -> None:
    """Log why the heartbeat could not move a database's key clock, once until it can: raw
    INSERTs there get keys that fall behind the clock meanwhile, which nothing else shows."""
    said = str(error).strip()
    if _clock_errors.get(alias) == said:
        return
    _clock_errors[alias] = said
    if grants:
        logger.error(
            "The heartbeat cannot move the key clock of database %r (%s): keys of raw INSERTs "
            "there fall behind the clock until it can. Its role lacks privileges; run as the "
            "database's owner: %s",
            alias,
            said,
            " ".join(grants),
        )
    else:
        logger.warning(
            "The heartbeat cannot move the key clock of database %r (%s): keys of raw INSERTs "
            "there fall behind the clock until it can; retrying",
            alias,
            said,
        )
