"""The interface every database implements (:class:`Database`), and what their key
generators share: the function's name, its bounds, its comment."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.utils.module_loading import import_string

from ..exceptions import NotSupported
from ..layout import BitLayout

FUNCTION = "django_snowflake_id"
#: A schema editor's ``quote_name``, and a column name or a key default that may be absent.
Quote = Callable[[str], str]
Key = str | None
# What the function's comment says, read back by the checks: "slot=W/D" or "slot=none"; a
# Galera node's function says "node=<wsrep_node_name>" too.
COMMENT = re.compile(r"slot=(?:(\d+)/(\d+)|none)")


def is_database_keyed(field: Any) -> bool:
    """Whether the database makes ``field``'s key when an INSERT leaves it out: a Snowflake
    primary key (a copy whose class was changed has not the attribute)."""
    return getattr(field, "has_database_default", False) is True and field.primary_key


def lead_units(layout: BitLayout) -> int:
    """How far (layout units) a burst may run the function ahead of its last catch-up:
    a second, and at least one unit."""
    return max(1, math.ceil(1000 / layout.time_unit_ms))


def hold_units(layout: BitLayout) -> int:
    """How far past the replayed clock a new incarnation skips: ``LEASE_SECONDS``."""
    from ..conf import get_settings

    return math.ceil(float(get_settings()["LEASE_SECONDS"]) * 1000 / layout.time_unit_ms)


def refusal(alias: str) -> str:
    # Short enough for MariaDB's MESSAGE_TEXT (128 characters) with a usual alias.
    return (
        f"database {alias!r} has no Snowflake worker slot of its own: "
        f"manage.py migrate --database={alias} (after the coordination database)"
    )


def comment(
    layout: BitLayout, slot: tuple[int, int] | None, alias: str, node: str | None = None
) -> str:
    where = "none" if slot is None else f"{slot[0]}/{slot[1]}"
    comment = f"django_snowflake layout={layout.fingerprint} slot={where} database={alias}"
    return comment if node is None else f"{comment} node={node}".replace("'", "''")


class Database:
    """What differs by database, for one connection: Django's ``connection.ops`` for keys.

    One subclass per database (:mod:`.postgresql`, :mod:`.mysql` and its :mod:`.galera`
    variant, :mod:`.sqlite`), chosen once per connection by
    :func:`django_snowflake.vendors.database`; no caller asks which database it is. Each method
    is documented here once, with the guarantee every implementation keeps. A method a
    database has nothing to do for returns the neutral value documented here; one it cannot do
    raises :class:`NotSupported`, which its callers handle.
    """

    #: The database's name in messages.
    display_name = "this database"
    #: Whether the package knows the database (its schema editor writes keys).
    supported = False
    #: Whether the database has a server-side ``django_snowflake_id()`` the package installs
    #: (and so a slot, a report and a clock of its own); SQLite's is the process's generator.
    has_server_function = False
    #: Whether the processes' heartbeats move the database's key clock (:meth:`move_clock`).
    moves_clock = False
    #: The query of the server's clock in seconds since 1970 (:meth:`now`).
    now_sql: str | None = None
    #: A datetime ``{}`` as seconds since 1970 (:meth:`epoch_sql`).
    epoch_template: str | None = None
    #: The dotted path of the :mod:`django_snowflake.bulk` loader class, as Django's
    #: ``DatabaseOperations.compiler_module`` names its compiler; ``None``: no loader.
    bulk_loader_class: str | None = None

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self.alias: str = connection.alias

    def not_supported(self, what: str) -> NotSupported:
        """The error of a method this database does not implement: ``what`` it would do."""
        return NotSupported(what, database=self.display_name, alias=self.alias)

    @classmethod
    def for_connection(cls, connection: BaseDatabaseWrapper) -> Database:
        """The instance for ``connection``: this class's, or a variant's the server names
        (a Galera node's). May query the server; the lookup caches it per connection."""
        return cls(connection)

    @classmethod
    def prepare_connection(cls, connection: BaseDatabaseWrapper) -> None:
        """Make a new Django connection ready before its first statement (no query): SQLite
        registers its function there. Nothing elsewhere."""

    # Installing the keys (migrate and sqlmigrate, through a schema editor).

    def function_sql(self) -> list[str]:
        """The statements that install the database's function (and its sequences) under the
        slot leased for it, idempotent; ``[]`` where the database has none."""
        return []

    def install(self, editor: BaseDatabaseSchemaEditor) -> None:
        """Run :meth:`function_sql` through ``editor`` (a Galera node: on every node)."""
        for statement in self.function_sql():
            editor.execute(statement, params=None)

    def switch_keys(self, editor: BaseDatabaseSchemaEditor, default: str | None = None) -> None:
        """Put the database on the key path its settings name, the function and every keyed
        column (MariaDB: ``SNOWFLAKE["MARIADB_KEYS"]``), ``default`` being the editor's
        :meth:`key_default`. Raises :class:`NotSupported` where there is one path only."""
        raise self.not_supported("Switching the path of keys")

    def needs_repair(self) -> bool:
        """Whether the database holds what ``migrate`` mends with no migration to apply
        (:meth:`repair`): functions an earlier version left (PostgreSQL: copies outside
        ``FUNCTION_SCHEMA``), MariaDB's event missing or disabled (W059)."""
        return False

    def repair(self, editor: BaseDatabaseSchemaEditor) -> None:
        """Mend what :meth:`needs_repair` found (PostgreSQL: leave one function, every key
        above every copy's); nothing where it is ``False``."""

    def function_copies(self) -> list[tuple[str, bool]]:
        """Every ``django_snowflake_id()`` of the database: ``(schema, pins its
        search_path)``; ``[]`` where there are no schemas."""
        return []

    def function_schema(self) -> str | None:
        """Where the one function belongs (``SNOWFLAKE["FUNCTION_SCHEMA"]``); ``None``
        where there are no schemas."""
        return None

    # A keyed column.

    def column_default_sql(self, key_default: Callable[[], str | None] | None = None) -> str:
        """The SQL of a keyed column's ``DEFAULT`` as the schema editor writes it;
        ``key_default`` gives the writing editor's :meth:`key_default`."""
        return f"{FUNCTION}()"

    def key_default(self) -> str | None:
        """What the key column of this database defaults to when a migration writes it
        (MariaDB: the key expression under the database's slot, or 0 on the trigger path);
        ``None`` where the column default is :meth:`column_default_sql` alone. May lease."""
        return None

    def plain_bigint(self, table: str, column: str) -> bool:
        """Whether ``table.column`` is a bigint with no identity or auto-increment of its own
        (one a migration made for an AutoField keeps its sequence); ``False`` where existing
        tables get no default (SQLite)."""
        return False

    def key_default_sql(self, quote: Quote, table: str, column: str, default: Key) -> list[str]:
        """Give the existing ``table.column`` its key default (``default``:
        :meth:`key_default`)."""
        return []

    def key_changed_sql(
        self, quote: Quote, table: str, old: Key, new: Key, default: Key
    ) -> list[str]:
        """What a table needs besides the column when its keyed column changes from ``old``
        to ``new`` (``None``: none), MariaDB's trigger; ``[]`` elsewhere."""
        return []

    # The clock.

    def move_clock(self, layout: BitLayout) -> str:
        """Move the database's key clock forward with the wall clock, or past anything an old
        primary may have issued the first time a new incarnation is seen (the failover skip).
        Called by each process's heartbeat while :attr:`moves_clock`. Returns ``"moved"``,
        ``"skipped"`` or ``""`` (nothing to move)."""
        return ""

    def clock_sql(self, layout: BitLayout) -> str | None:
        """The query of how far (ms) the time of the function's last key is behind the
        server's clock (negative: ahead); no row or ``None`` where it cannot be told."""
        return None

    def missing_grants(self) -> list[str]:
        """The ``GRANT`` statements the connected role lacks for :meth:`move_clock`, for a DBA
        to paste (``check --database``, the heartbeat's error); ``[]`` when it lacks none or
        nothing moves the clock."""
        return []

    def idle_clock(self) -> str | None:
        """Why the key clock that :meth:`move_clock` moves would stop while no process of the
        project runs (``check --deploy``, W059): ``"off"``, ``"missing"``, ``"disabled"``,
        or ``"hidden"`` (MariaDB's event, :func:`.mysql.keys.idle_clock`; on Galera each node's
        own); ``None`` when something does, or the keys need no mover."""
        return None

    def hidden_function(self) -> str | None:
        """Why the function is installed but this role cannot see it (its catalog hides a
        routine the role may not execute), with the ``GRANT`` that shows it; ``None`` when the
        function is visible or not installed."""
        return None

    # What show_worker, the admin and the checks read.

    def installed_comment(self) -> str | None:
        """The comment of the installed function (``""`` without one); ``None`` when the
        database has no function."""
        return None

    def function_slot(self) -> tuple[bool, tuple[int, int] | None]:
        """Whether the database has the function, and the slot it issues under (``None``:
        it refuses)."""
        comment = self.installed_comment()
        if comment is None:
            return False, None
        found = COMMENT.search(comment)
        if found is None or found.group(1) is None:
            return True, None
        return True, (int(found.group(1)), int(found.group(2)))

    def node_name(self) -> str | None:
        """The node of a cluster this connection is on (Galera's ``wsrep_node_name``);
        ``None`` off a cluster."""
        return None

    def where(self) -> str:
        """Where the function lives, for people: ``"schema public"``, ``"database shop"``."""
        return f"database {self.connection.settings_dict['NAME']}"

    def own_label(self) -> str:
        """The ``WorkerNode.label`` the function should issue under (its own, its node's)."""
        from ..database_slots import database_label

        return database_label(self.alias, self.node_name())

    def stranger(self) -> bool:
        """Whether this node of a cluster has no keys of its own (W058); ``False`` off one."""
        return False

    def unserved(self) -> bool:
        """Whether the cluster's keys leave out one of its nodes; ``False`` off a cluster."""
        return False

    def nodes_report(self) -> list[dict[str, Any]]:
        """Every node of the cluster, as ``show_worker`` lists them; ``[]`` off a cluster."""
        return []

    def keys_paths(self) -> tuple[str | None, str] | None:
        """``(installed, wanted)``: the key path the function serves (``None``: none) and the
        one the settings name; ``None`` where there is one path only."""
        return None

    def function_report(self) -> dict[str, Any] | None:
        """The function as seen from outside (``show_worker``, the admin): ``where`` it lives,
        its ``slot`` (``"W/D"``, ``None`` when it refuses), ``behind_ms`` (:meth:`clock_sql`),
        ``installed`` (``False`` before ``migrate``) and ``error``, why the database could not
        be read. ``None`` without a server function (SQLite's is the process's generator)."""
        return None

    # The lease's SQL (allocators/database.py).

    def now(self) -> datetime:
        """The server's clock (:attr:`now_sql`), an aware datetime in UTC, read as seconds
        since 1970 (a datetime may be read in another zone). Raises ``ImproperlyConfigured``
        where the database allocator cannot run."""
        if self.now_sql is None:
            raise ImproperlyConfigured(
                f"The database allocator supports PostgreSQL, MySQL, MariaDB and SQLite, not "
                f"{self.connection.display_name}."
            )
        with self.connection.cursor() as cursor:
            cursor.execute(self.now_sql)
            (seconds,) = cursor.fetchone()
        return datetime.fromtimestamp(float(seconds), tz=UTC)

    def epoch_sql(self, expression: str) -> str:
        """``expression`` (a datetime column) as seconds since 1970, measured by the server
        (:attr:`epoch_template`)."""
        if self.epoch_template is None:
            raise self.not_supported("Reading a time as seconds")
        return self.epoch_template.format(expression)

    def incarnation(self) -> tuple[str, bool]:
        """Which server and which history of its data (a failover or a restore changes it),
        and whether the database was never a standby nor restored (a claim may then trust an
        empty table). ``("", True)`` where it cannot tell."""
        return "", True

    def asynchronous_standbys(self) -> int | None:
        """How many standbys replicate the database asynchronously; ``None`` when it cannot
        tell (no privilege to see them)."""
        try:
            with self.connection.cursor() as cursor:
                return self.count_standbys(cursor)
        except DatabaseError:
            return None

    def count_standbys(self, cursor: Any) -> int | None:
        """:meth:`asynchronous_standbys` through ``cursor``; ``None`` where it cannot tell."""
        return None

    def is_conflict(self, error: DatabaseError) -> bool:
        """Whether ``error`` is a deadlock or a certification conflict, which a renewal may
        simply run again."""
        return False

    def after_conflict(self) -> None:
        """Before a write that met :meth:`is_conflict` runs again (Galera: wait until this
        node has applied what the cluster committed before it)."""

    def lock_hint(self, error: DatabaseError) -> str:
        """What to add to a claim's error when the database was locked; ``""``."""
        return ""

    # Bulk loading.

    def bulk_loader(self) -> Any:
        """The class of :mod:`django_snowflake.bulk`'s loader for this database
        (:attr:`bulk_loader_class`): its writes store the rows ``bulk_create`` would, all or
        nothing. Raises :class:`NotSupported` where the database has none (``bulk_create()``
        still works)."""
        if self.bulk_loader_class is None:
            raise self.not_supported("bulk_load")
        return import_string(self.bulk_loader_class)


class ServerDatabase(Database):
    """A database with a ``django_snowflake_id()`` of its own, issuing under a slot leased for
    it in the coordination database (:mod:`django_snowflake.database_slots`)."""

    has_server_function = True
    #: The query of the comment of the installed function (no row: none installed).
    comment_sql = ""
    #: The query of a column's type and what makes its values (parameters: table, column).
    column_sql = ""

    def install_sql(
        self, layout: BitLayout, slot: tuple[int, int] | None, node: str | None = None
    ) -> list[str]:
        """The statements that create (or replace) the function for ``layout`` and ``slot``
        (``None``: it refuses, saying what to run), idempotent; with ``node``, that Galera
        node's own."""
        raise NotImplementedError

    def own_sql(self, layout: BitLayout, node: str | None = None) -> list[str]:
        """:meth:`install_sql` under the slot leased for this database (its node ``node``)."""
        from ..database_slots import lease_database_slot

        slot = lease_database_slot(self.alias, layout, node, self.slot_to_keep())
        return self.install_sql(layout, slot, node)

    def slot_to_keep(self) -> tuple[int, int] | None:
        """The slot a lease tries first for this database: ``None``, a fresh lease."""
        return None

    def function_sql(self) -> list[str]:
        from ..conf import get_layout

        return self.own_sql(get_layout())

    def installed_comment(self) -> str | None:
        with self.connection.cursor() as cursor:
            cursor.execute(*self.comment_query())
            row = cursor.fetchone()
        return None if row is None else str(row[0] or "")

    def comment_query(self) -> tuple[str, list[str]]:
        """:attr:`comment_sql` and its parameters."""
        return self.comment_sql, [FUNCTION]

    def plain_bigint(self, table: str, column: str) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute(self.column_sql, [table, column])
            row = cursor.fetchone()
        # No such column: nothing of ours to give a default.
        return row is not None and self.is_plain_bigint(row)

    def is_plain_bigint(self, row: tuple[str, ...]) -> bool:
        """Whether the :attr:`column_sql` ``row`` is a bigint with nothing making its values."""
        raise NotImplementedError

    def function_report(self) -> dict[str, Any] | None:
        from ..conf import get_layout

        report: dict[str, Any] = {"database": self.alias, "installed": False, "where": None}
        report.update(slot=None, behind_ms=None)
        try:
            exists, slot = self.function_slot()
            report["installed"] = exists
            report["where"] = self.where()
            hidden = None if exists else self.hidden_function()
            if hidden is not None:
                report["error"] = hidden
            if exists and slot is not None:
                report["slot"] = f"{slot[0]}/{slot[1]}"
                clock = self.clock_sql(get_layout())
                row = None
                if clock is not None:
                    with self.connection.cursor() as cursor:
                        cursor.execute(clock)
                        row = cursor.fetchone()
                report["behind_ms"] = None if row is None else int(row[0])
        except DatabaseError as exc:
            report["error"] = str(exc).strip()
        return report
