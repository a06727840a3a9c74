"""The migration operations that install each database's key generator, and the
``post_migrate`` receiver that gives a database its own slot once it can have one, and puts a
MariaDB database on the path ``SNOWFLAKE["MARIADB_KEYS"]`` names."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connections, router
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation

from .database_keys import install_function, keys_path, own_label, switch_keys
from .database_slots import slot_holder
from .vendors import galera, installed_comment, installed_slot, mysql, postgresql
from .vendors.base import is_database_keyed


class _DatabaseOperation(Operation):
    """An operation on the database alone: it changes no model state, and reversing it
    keeps what it made (columns may still default to the function)."""

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
        self.apply(schema_editor, to_state)

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        """Do the operation's work on ``schema_editor``'s database, ``state`` being the
        migration state after it."""
        raise NotImplementedError

    def database_backwards(self, *args: Any) -> None:
        pass


class InstallDatabaseFunction(_DatabaseOperation):
    """Create ``django_snowflake_id()`` (and its sequences) for the project's layout, under
    the slot leased for this database."""

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        install_function(schema_editor)

    def describe(self) -> str:
        return "Install the database's Snowflake function django_snowflake_id()"


class AddDatabaseDefaults(_DatabaseOperation):
    """Give every existing table keyed by a Snowflake primary key the database's function as
    its key's default (its trigger on MariaDB): tables made before ``SnowflakeField`` primary
    keys had one, so raw SQL that leaves the key out works on every Snowflake-keyed table.

    Tables created later get it from the schema editor. Idempotent.
    """

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        connection = schema_editor.connection
        tables = set(connection.introspection.table_names())
        # The migration state, not the models: with the switch turned on, a model whose
        # migrations made an AutoField column reports a SnowflakeAutoField at run time.
        for model in state.apps.get_models(include_auto_created=True):
            pk = model._meta.pk
            if (
                model._meta.app_label not in state.real_apps  # made just now, as they are
                and is_database_keyed(pk)
                and model._meta.db_table in tables
                and router.allow_migrate_model(connection.alias, model)
            ):
                schema_editor._snowflake_default(model, pk)  # type: ignore[attr-defined]

    def describe(self) -> str:
        return "Give every Snowflake primary key the database's django_snowflake_id() default"


class RepairDatabaseFunctions(_DatabaseOperation):
    """Leave a PostgreSQL database one ``django_snowflake_id()``, the one in
    ``SNOWFLAKE["FUNCTION_SCHEMA"]``, pinning its ``search_path``.

    Before this operation, the package installed a function and its sequences in every schema a ``migrate``
    ran in (django-tenants' tenants, a ``search_path`` in ``OPTIONS``), all issuing under the
    database's one slot, so two schemas could hold the same key. This installs the function
    where it belongs if it is missing or unpinned there, repoints every column default that calls
    another copy, skips its clock past every other copy's and drops them
    (:func:`django_snowflake.vendors.postgresql.repair_sql`). Idempotent; nothing elsewhere.
    """

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        repair_functions(schema_editor)

    def describe(self) -> str:
        return "Leave the database one django_snowflake_id(), in SNOWFLAKE['FUNCTION_SCHEMA']"


def needs_repair(connection: Any) -> bool:
    """Whether ``connection``'s database has a function outside the function schema, or an
    unpinned one there (PostgreSQL; ``False`` elsewhere)."""
    if connection.vendor != "postgresql":
        return False
    found = postgresql.copies(connection)
    return any(name != postgresql.schema() or not pinned for _, name, pinned in found)


def repair_functions(editor: BaseDatabaseSchemaEditor) -> None:
    """Run :class:`RepairDatabaseFunctions` through ``editor``."""
    from .conf import get_layout

    connection = editor.connection
    if not needs_repair(connection):
        return
    found = postgresql.copies(connection)
    if not any(name == postgresql.schema() and pinned for _, name, pinned in found):
        install_function(editor)
    for statement in postgresql.repair_sql(connection, get_layout()):
        editor.execute(statement, params=None)


class SwitchMariaDBKeys(_DatabaseOperation):
    """On MariaDB, put the database on the path ``SNOWFLAKE["MARIADB_KEYS"]`` names: the
    column default over one sequence (the default), or the trigger and function (the strict
    path). Later switches need no migration: ``migrate`` switches after it runs
    (:func:`reinstall_after_migrate`)."""

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        if schema_editor.connection.vendor == "mysql":
            switch_keys(schema_editor)

    def describe(self) -> str:
        return "Put MariaDB's keys on the path SNOWFLAKE['MARIADB_KEYS'] names"


def reinstall_after_migrate(using: str, **kwargs: Any) -> None:
    """``post_migrate``: give a database whose function has no slot of its own (it was
    migrated before the coordination database) or another's (it is a copy of another database,
    or on a Galera node of another node's, by a state transfer) one, now that ``migrate`` runs
    on it again (through that node: the others are then installed too); on a Galera cluster's
    column default, give the nodes it does not name yet theirs, whichever node it runs through.

    A slot whose row is gone (a test runner's flush of ``WorkerNode``, which sends
    ``post_migrate`` too) is left as it is: the function keeps issuing under it.
    """
    from django.apps import apps

    connection = connections[using]
    # A test's available_apps may leave the package out of the registry it migrates.
    if connection.vendor not in ("postgresql", "mysql") or not apps.is_installed(
        "django_snowflake"
    ):
        return
    # The repair of W052 and W053, whose hint says to migrate (with nothing to apply).
    if needs_repair(connection):
        with connection.schema_editor() as editor:
            repair_functions(editor)
    try:
        exists, slot = installed_slot(using)
        if not exists:
            return
        # MariaDB: the path the setting names, if the function serves the other.
        switched = connection.vendor == "mysql" and (
            mysql.installed_keys(installed_comment(connection)) != keys_path(connection)
            or galera.unserved(connection)  # a Galera node the keys do not name yet
        )
        if not switched and slot is not None and slot_holder(slot) in (None, own_label(using)):
            return
    except DatabaseError:
        return
    with connection.schema_editor() as editor:
        if connection.vendor == "mysql":
            # Also every keyed column's default, which names the slot on the default path.
            switch_keys(editor)
        else:
            install_function(editor)
