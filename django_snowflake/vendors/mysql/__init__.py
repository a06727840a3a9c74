"""MariaDB and MySQL: keys from a column default over one sequence (:mod:`.keys`, the default)
or from the strict trigger and function (:mod:`.trigger`, ``SNOWFLAKE["MARIADB_KEYS"] =
"trigger"``); a Galera node is :class:`~django_snowflake.vendors.galera.Galera`, a subclass."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from ...layout import BitLayout
from ..base import (
    FUNCTION,
    Database,
    Key,
    Quote,
    ServerDatabase,
    comment,
    hold_units,
    lead_units,
    refusal,
)
from . import keys
from .keys import KEYS_COMMENT, KEYS_DEFAULT, KEYS_TRIGGER
from .trigger import mysql_function_sql

#: MySQL's and MariaDB's error for a deadlock, and for a Galera certification conflict.
DEADLOCK = 1213

logger = logging.getLogger("django_snowflake")
#: The databases whose event migrate was refused, warned of once until it makes it.
_TICK_REFUSED: set[str] = set()


def keys_setting() -> str:
    """``SNOWFLAKE["MARIADB_KEYS"]``: which path a MariaDB database takes."""
    from ...conf import get_settings

    return str(get_settings()["MARIADB_KEYS"])


class MariaDB(ServerDatabase):
    """MariaDB (and MySQL, :class:`MySQL`): the key path ``SNOWFLAKE["MARIADB_KEYS"]`` names,
    whose clock the processes' heartbeats move; ``LOAD DATA LOCAL INFILE`` loads in bulk."""

    supported = True

    display_name = "MariaDB"
    moves_clock = True
    bulk_loader_class = "django_snowflake.bulk.mysql.MySQLLoader"
    now_sql = "SELECT UNIX_TIMESTAMP(NOW(6))"
    epoch_template = "UNIX_TIMESTAMP({})"
    comment_sql = (
        "SELECT routine_comment FROM information_schema.routines "
        "WHERE routine_schema = DATABASE() AND routine_name = %s"
    )
    # Type and extra of a column.
    column_sql = (
        "SELECT data_type, extra FROM information_schema.columns "
        "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = %s"
    )

    @classmethod
    def for_connection(cls, connection: BaseDatabaseWrapper) -> Database:
        return cls(connection) if connection.display_name == "MariaDB" else MySQL(connection)

    def install_sql(
        self, layout: BitLayout, slot: tuple[int, int] | None, node: str | None = None
    ) -> list[str]:
        """Off Galera, on the path ``SNOWFLAKE["MARIADB_KEYS"]`` names: the column default's
        sequence (:func:`.keys.key_sql`), or the strict function; with ``node``, Galera node
        ``node``'s own strict function, run on it."""
        alias = self.alias
        if node is None and keys_setting() == KEYS_DEFAULT:
            return keys.key_sql(
                layout,
                slot,
                lead_units=lead_units(layout),
                comment=f"{comment(layout, slot, alias)} {KEYS_COMMENT}",
                refusal=refusal(alias),
            )
        return mysql_function_sql(
            layout,
            slot,
            lead_units=lead_units(layout),
            hold_units=hold_units(layout),
            comment=comment(layout, slot, alias, node),
            refusal=refusal(alias),
            node=node,
            copied=f"this is Galera node {node}'s function (a state transfer copied it): "
            f"manage.py migrate --database={alias} through this node",
        )

    def install(self, editor: BaseDatabaseSchemaEditor) -> None:
        """The path's statements, then the event that moves the column default's clock while
        no process runs (:func:`.keys.tick_sql`; dropped off that path; a Galera node's own,
        made on each node, is :meth:`.Galera.install_ticks`). A role that may not create events migrates all the
        same, with a warning: the event is an addition to the heartbeats, and
        ``check --deploy`` says what its absence costs (W059)."""
        super().install(editor)
        if self.node_name() is None:
            self.install_tick(lambda statement: editor.execute(statement, params=None))

    def install_tick(self, execute: Callable[[str], Any], node: str | None = None) -> None:
        """:meth:`install`'s event, through ``execute`` (on Galera, node ``node``'s own)."""
        from ...conf import get_layout

        layout = get_layout()
        ticks = keys_setting() == KEYS_DEFAULT
        statements = (
            keys.tick_sql(
                layout, lead_units=lead_units(layout), hold_units=hold_units(layout), node=node
            )
            if ticks
            else [keys.DROP_TICK_SQL]
        )
        try:
            for statement in statements:
                execute(statement)
        except DatabaseError as exc:
            if not exc.args or exc.args[0] not in keys.DENIED:
                raise
            if ticks and self.alias not in _TICK_REFUSED:
                # Once until an install makes it: migrate installs at each of its migrations.
                _TICK_REFUSED.add(self.alias)
                logger.warning(
                    "Database %r: the role that runs migrate may not create the event %s, so "
                    "raw keys follow the clock only while a process runs (%s). GRANT EVENT ON "
                    "the database to it and migrate again (docs: Grants).",
                    self.alias,
                    keys.TICK_EVENT,
                    exc.args[-1],
                )
        else:
            _TICK_REFUSED.discard(self.alias)

    def needs_repair(self) -> bool:
        """Whether the column default's event is missing or disabled (W059): ``migrate`` makes
        it again with no migration to apply, as that check's hint says."""
        try:
            return self.idle_clock() in ("missing", "disabled")
        except DatabaseError:
            return False

    def repair(self, editor: BaseDatabaseSchemaEditor) -> None:
        self.install_tick(lambda statement: editor.execute(statement, params=None))

    def idle_clock(self) -> str | None:
        paths = self.keys_paths()
        installed = None if paths is None else paths[0]
        if installed is None and self.hidden_function() is not None:
            # A role without EXECUTE (the app's, on this path) sees no function: the settings
            # say which path migrate installed.
            installed = keys_setting()
        if installed != KEYS_DEFAULT:
            return None
        with self.connection.cursor() as cursor:
            return keys.idle_clock(cursor, self.node_name())

    def is_plain_bigint(self, row: tuple[str, ...]) -> bool:
        return row[0] == "bigint" and "auto_increment" not in row[1].lower()

    def key_default(self) -> str | None:
        """The key expression under the database's slot, or 0 (the trigger path, whose trigger
        replaces it as a NULL key: without a DEFAULT, an INSERT ... SELECT that leaves the key
        out fails before the trigger runs)."""
        from ...conf import get_layout
        from ...database_slots import lease_database_slot

        if keys_setting() == KEYS_TRIGGER:
            return "0"
        layout = get_layout()
        return keys.key_expression(layout, lease_database_slot(self.alias, layout))

    def column_default_sql(self, key_default: Callable[[], str | None] | None = None) -> str:
        # MariaDB refuses a stored function as a DEFAULT: the expression the editor writing
        # the column chose (key_default()), 0 outside one.
        return (key_default() if key_default is not None else None) or "0"

    def key_default_sql(self, quote: Quote, table: str, column: str, default: Key) -> list[str]:
        return keys.key_default_sql(quote, table, column, default or "0")

    def key_changed_sql(
        self, quote: Quote, table: str, old: Key, new: Key, default: Key
    ) -> list[str]:
        return keys.key_changed_sql(quote, table, old, new, default or "0")

    def switch_keys(self, editor: BaseDatabaseSchemaEditor, default: str | None = None) -> None:
        """Found through the catalog (columns defaulting to our sequences, tables with our
        trigger), so that it serves ``post_migrate`` too, when the setting changed. The order
        keeps one sequence issuing at a time: towards the column default, the function first
        (the triggers that remain until their table is done call it, and it draws the key
        sequence); towards the trigger, the tables first (their triggers call the function,
        still over the key sequence), then the function, started above that sequence."""
        default = default or self.key_default() or "0"
        with self.connection.cursor() as cursor:
            cursor.execute(keys.KEYED_COLUMNS_SQL, keys.KEYED_COLUMNS_PARAMS)
            columns = keys.keyed_columns(cursor.fetchall())

        def tables() -> None:
            for table, column in columns:
                for statement in keys.key_default_sql(editor.quote_name, table, column, default):
                    editor.execute(statement, params=None)

        if default == "0":
            tables()
            self.install(editor)
        else:
            self.install(editor)
            tables()

    def keys_paths(self) -> tuple[str | None, str] | None:
        return keys.installed_keys(self.installed_comment()), keys_setting()

    def move_clock(self, layout: BitLayout) -> str:
        with self.connection.cursor() as cursor:
            return keys.move_clock(
                cursor,
                layout,
                lead_units=lead_units(layout),
                hold_units=hold_units(layout),
                node=self.node_name(),
            )

    def clock_sql(self, layout: BitLayout) -> str | None:
        return keys.clock_sql(layout, self.node_name())

    def missing_grants(self) -> list[str]:
        with self.connection.cursor() as cursor:
            return keys.missing_grants(cursor, self.node_name())

    def hidden_function(self) -> str | None:
        """MariaDB's catalog hides a routine from a role without a privilege on it: the
        migration that installs the function, applied here, tells it is there."""
        from django.db.migrations.recorder import MigrationRecorder

        if self.installed_comment() is not None:
            return None
        applied = MigrationRecorder(self.connection).applied_migrations()
        if ("django_snowflake", "0003_database_keys") not in applied:
            return None
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT DATABASE(), CURRENT_USER()")
            name, role = cursor.fetchone()
        user, _, host = role.rpartition("@")
        return (
            f"installed, but role '{user}'@'{host}' may not execute it, so the server hides it: "
            f"GRANT EXECUTE ON FUNCTION `{name}`.`{FUNCTION}` TO '{user}'@'{host}';"
        )

    def incarnation(self) -> tuple[str, bool]:
        """The server ID, host name and port; never a standby if it never replicated."""
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT @@server_id, @@hostname, @@port, @@gtid_slave_pos")
            server_id, host, port, replicated = cursor.fetchone()
        return f"{server_id}@{host}:{port}", not replicated

    #: How the server lists its replicas.
    replicas_sql = "SHOW SLAVE HOSTS"

    def count_standbys(self, cursor: Any) -> int | None:
        cursor.execute(self.replicas_sql)
        replicas = len(cursor.fetchall())
        cursor.execute("SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_%'")
        semi_sync = any(
            name in ("rpl_semi_sync_master_enabled", "rpl_semi_sync_source_enabled")
            and value == "ON"
            for name, value in cursor.fetchall()
        )
        return 0 if semi_sync else replicas

    def is_conflict(self, error: DatabaseError) -> bool:
        return error.args[:1] == (DEADLOCK,)


class MySQL(MariaDB):
    """MySQL: MariaDB's keys, but its own incarnation (``server_uuid``) and replica list."""

    display_name = "MySQL"
    replicas_sql = "SHOW REPLICAS"

    def incarnation(self) -> tuple[str, bool]:
        """The server ID and ``server_uuid``; never a standby if it holds no transaction of
        another server."""
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT @@server_id, @@server_uuid, @@gtid_executed")
            server_id, server_uuid, executed = cursor.fetchone()
        sources = {part.split(":")[0].strip() for part in executed.split(",") if part}
        return f"{server_id}/{server_uuid}", sources <= {server_uuid}
