"""The migration operations that install each database's key generator, and the
``post_migrate`` receiver that gives a database its own slot once it can have one, and puts a
MariaDB database on the path ``SNOWFLAKE["MARIADB_KEYS"]`` names."""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import DatabaseError, connections, router
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation

from .database_slots import slot_holder
from .exceptions import NotSupported
from .vendors import database
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
        database(schema_editor.connection).install(schema_editor)

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
    (:meth:`django_snowflake.vendors.postgresql.PostgreSQL.repair`). Idempotent; nothing
    elsewhere.
    """

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        database(schema_editor.connection).repair(schema_editor)

    def describe(self) -> str:
        return "Leave the database one django_snowflake_id(), in SNOWFLAKE['FUNCTION_SCHEMA']"


class SwitchMariaDBKeys(_DatabaseOperation):
    """On MariaDB, put the database on the path ``SNOWFLAKE["MARIADB_KEYS"]`` names: the
    column default over one sequence (the default), or the trigger and function (the strict
    path). Later switches need no migration: ``migrate`` switches after it runs
    (:func:`reinstall_after_migrate`)."""

    def apply(self, schema_editor: BaseDatabaseSchemaEditor, state: Any) -> None:
        with contextlib.suppress(NotSupported):  # one path only
            database(schema_editor.connection).switch_keys(
                schema_editor,
                schema_editor._snowflake_key_default(),  # type: ignore[attr-defined]
            )

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
    keys = database(connection)
    # A test's available_apps may leave the package out of the registry it migrates.
    if not keys.has_server_function or not apps.is_installed("django_snowflake"):
        return
    # The repair of W052, W053 and W059, whose hints say to migrate (with nothing to apply).
    if keys.needs_repair():
        with connection.schema_editor() as editor:
            keys.repair(editor)
    try:
        exists, slot = keys.function_slot()
        if not exists:
            return
        # MariaDB: the path the setting names, if the function serves the other, or a Galera
        # node the keys do not name yet.
        paths = keys.keys_paths()
        switched = paths is not None and (paths[0] != paths[1] or keys.unserved())
        if not switched and slot is not None and slot_holder(slot) in (None, keys.own_label()):
            return
    except DatabaseError:
        return
    with connection.schema_editor() as editor:
        if paths is not None:
            # Also every keyed column's default, which names the slot on the default path.
            editor_keys = database(editor.connection)
            editor_keys.switch_keys(editor, editor._snowflake_key_default())  # type: ignore[attr-defined]
        else:
            keys.install(editor)
