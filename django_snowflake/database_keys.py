"""Snowflake IDs made by the database, for every INSERT that leaves the key out.

Where a key is made is decided here, for every database (docs/architecture.rst):

- Django's own inserts into a table keyed by ``SnowflakeAutoField`` or ``SnowflakeField``
  carry a key this process made from its leased worker slot
  (:meth:`~django_snowflake.fields.SnowflakeAutoField.get_pk_value_on_save`, or the field's
  default): fencing, failover incarnations and a slot unique across every database of the ID
  space come with the process's lease.
- An INSERT that leaves the key out (raw SQL, another service, a ``RunSQL`` data migration, the
  auto-created many-to-many tables of apps that pin ``AutoField``, whose tables the migration
  state builds with the project's ``DEFAULT_AUTO_FIELD``) gets one from the database's
  ``django_snowflake_id()``: the column's ``DEFAULT`` on PostgreSQL and SQLite, a ``BEFORE
  INSERT`` trigger on MariaDB/MySQL (a stored function may not be a column default there).

The function of each server database issues under **a slot of its own**, leased for that
database (label ``database:<alias>``, host ``(database)``, a lease that never expires, so no
process claims it) in the coordination database's ``WorkerNode`` (``SNOWFLAKE["DATABASE"]``),
from the highest worker ID down (processes claim from the lowest up). The slot is written into
the function, so it reads no table to issue; a database whose function has no slot (migrated
before the coordination database had its table) refuses every key with an error saying what to
run, until ``migrate`` runs on it again; ``check --database`` says so too (``E034``).

- PostgreSQL: a PL/pgSQL function over sequences (non-transactional: a rollback never lowers
  the clock). An ID is ``base + counter`` read in layout units (time, then sequence), so the
  logical clock never goes back, whatever the server's clock does. A session behind the wall
  clock moves ``base`` up only if it takes a session advisory lock *without waiting*
  (``pg_try_advisory_lock``); the others return their value, unique, a moment behind the
  clock: nobody queues, so the convoy of a lock every session waits on at each new
  millisecond cannot form. A burst may run ahead of the clock by ``lead`` units past the
  ``anchor`` (a catch-up point, raised every half lead); beyond, the function sleeps until
  the clock is there. On the first call of a session it compares the server's incarnation
  (system identifier and timeline, as the process leases do) with the one it last saw; after
  a promotion or a restore it skips its clock past anything the old primary could have issued: past
  ``max(now, replayed clock, replayed anchor) + hold + 2 * lead``, where ``hold`` is
  ``LEASE_SECONDS``, the replication lag (and clock skew) it tolerates.
- MariaDB/MySQL: the same clock made of sequences only, which MariaDB draws without a lock
  anyone waits for (no table is touched, so no statement-long table lock): see
  :mod:`django_snowflake.mysql_function`. On a Galera cluster every node has a function of its
  own, over sequences only it draws, under a slot of its own (label
  ``database:<alias>@<wsrep_node_name>``): ``migrate`` through one node installs it on every
  node it can reach (:func:`install_function`).
- SQLite: ``django_snowflake_id()`` is registered on every Django connection and returns
  :func:`django_snowflake.generate` (the process's own worker slot). A connection without it
  (the ``sqlite3`` shell) fails the INSERT with "unknown function".

The schema editor of every Django connection is extended here, so ``migrate`` and
``sqlmigrate`` emit the same statements: the function before the first table that needs it
(with migrations and without: ``--nomigrations`` test runs create tables through the same
editor), the column ``DEFAULT`` (PostgreSQL, SQLite) or the trigger (MariaDB).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.conf import settings as django_settings
from django.db import DatabaseError, IntegrityError, connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.signals import connection_created
from django.db.migrations.operations.base import Operation
from django.utils import timezone

from .exceptions import LayoutMismatch, SnowflakeError
from .layout import BitLayout

FUNCTION = "django_snowflake_id"
COUNTER = "django_snowflake_id_counter"
BASE = "django_snowflake_id_base"
ANCHOR = "django_snowflake_id_anchor"
INCARNATION = "django_snowflake_id_incarnation"
FAILOVER = "django_snowflake_id_failover"
# The database's worker slot in WorkerNode.
DATABASE_HOST = "(database)"
DATABASE_LABEL = "database"
LEASE_END = datetime(9999, 12, 31, tzinfo=UTC)
# pg_advisory_lock key of the catch-up: the first 8 bytes of sha1("django_snowflake_id").
PG_LOCK_KEY = int.from_bytes(hashlib.sha1(FUNCTION.encode()).digest()[:8], "big", signed=True)
# After a failed claim on SQLite, how long a connection waits before it claims again.
CLAIM_RETRY_SECONDS = 1.0
# What the function's comment says, read back by the checks: "slot=W/D" or "slot=none"; a
# Galera node's function says "node=<wsrep_node_name>" too.
_COMMENT = re.compile(r"slot=(?:(\d+)/(\d+)|none)")

logger = logging.getLogger("django_snowflake")

# Set while the schema editor writes a column definition: only then does a Snowflake primary
# key report its database default (see fields._DatabaseKeyDefault).
_writing_columns: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "django_snowflake_writing_columns", default=None
)


def column_default_vendor() -> str | None:
    """The vendor whose schema editor is writing column definitions now, else ``None``."""
    return _writing_columns.get()


class DatabaseSnowflake(models.Func):
    """``django_snowflake_id()``: the column default of a Snowflake primary key."""

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


def _worker_node() -> Any:
    # Through the app registry: models is above this module (fields import it).
    from django.apps import apps

    return apps.get_model("django_snowflake", "WorkerNode")


def database_label(alias: str, node: str | None = None) -> str:
    """The ``WorkerNode.label`` of the slot leased for the function of database ``alias``, or
    of its Galera node ``node`` (its ``wsrep_node_name``)."""
    label = f"{DATABASE_LABEL}:{alias}"
    return label if node is None else f"{label}@{node}"


def lead_units(layout: BitLayout) -> int:
    """How far (layout units) a burst may run the function ahead of its last catch-up:
    a second, and at least one unit."""
    return max(1, math.ceil(1000 / layout.time_unit_ms))


def hold_units(layout: BitLayout) -> int:
    """How far past the replayed clock a new incarnation skips: ``LEASE_SECONDS``."""
    from .conf import get_settings

    return math.ceil(float(get_settings()["LEASE_SECONDS"]) * 1000 / layout.time_unit_ms)


def install_sql(
    vendor: str,
    layout: BitLayout,
    slot: tuple[int, int] | None,
    *,
    alias: str = "default",
    node: str | None = None,
) -> list[str]:
    """The statements that create (or replace) the function on ``vendor``; ``[]`` on SQLite.

    They embed ``layout`` and the database's ``slot`` (``None``: the function refuses, naming
    ``alias``) and are idempotent, so every migration that creates a Snowflake column may run
    them first. With ``node`` (MariaDB), they are Galera node ``node``'s own, run on it.
    """
    if vendor == "postgresql":
        return _postgresql_sql(layout, slot, alias)
    if vendor == "mysql":
        return _mysql_sql(layout, slot, alias, node)
    return []


def _refusal(alias: str) -> str:
    # Short enough for MariaDB's MESSAGE_TEXT (128 characters) with a usual alias.
    return (
        f"database {alias!r} has no Snowflake worker slot of its own: "
        f"manage.py migrate --database={alias} (after the coordination database)"
    )


def _comment(
    layout: BitLayout, slot: tuple[int, int] | None, alias: str, node: str | None = None
) -> str:
    where = "none" if slot is None else f"{slot[0]}/{slot[1]}"
    comment = f"django_snowflake layout={layout.fingerprint} slot={where} database={alias}"
    return comment if node is None else f"{comment} node={node}".replace("'", "''")


def _postgresql_sql(layout: BitLayout, slot: tuple[int, int] | None, alias: str) -> list[str]:
    comment = _comment(layout, slot, alias)
    if slot is None:
        refusal = _refusal(alias).replace("'", "''")
        return [
            f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $snowflake$
BEGIN
    RAISE EXCEPTION '{refusal}' USING ERRCODE = 'object_not_in_prerequisite_state';
END
$snowflake$""",
            f"COMMENT ON FUNCTION {FUNCTION}() IS '{comment}'",
        ]
    worker, datacenter = slot
    sb = layout.sequence_bits
    lead = lead_units(layout)
    hold = hold_units(layout)
    fixed = layout.compose(0, worker_id=worker, datacenter_id=datacenter)
    compose = f"((m >> {sb}) << {layout.time_shift}) | {fixed} | (m & {layout.max_sequence})"
    now_units = (
        f"floor((extract(epoch from clock_timestamp()) * 1000 - {layout.epoch_ms})"
        f" / {layout.time_unit_ms})::bigint"
    )
    # The server's incarnation as one bigint: system identifier and current timeline (the WAL
    # file being written starts with it; pg_control_checkpoint() lags a promotion).
    incarnation = (
        "(SELECT hashtextextended(system_identifier::text || '/' || "
        "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8), 0) FROM pg_control_system())"
    )
    # Read through pg_sequence_last_value(), not a SELECT from the sequence: the same
    # unlocked latest value without a query plan's executor run, twice per key. It is NULL
    # for a sequence never set (the install sets base) and, on some PostgreSQL versions, for
    # a role that may not read it: the function refuses then, never reading base as 0.
    last_base = f"pg_sequence_last_value('{BASE}'::regclass)"
    return [
        f"CREATE SEQUENCE IF NOT EXISTS {COUNTER} AS bigint MINVALUE 0 START 0",
        f"CREATE SEQUENCE IF NOT EXISTS {BASE} AS bigint MINVALUE 0 START 0",
        f"CREATE SEQUENCE IF NOT EXISTS {ANCHOR} AS bigint MINVALUE 0 START 0",
        # Base has a value from the start (0 until the first catch-up), so a NULL read is
        # an error, not "never moved".
        f"""DO $snowflake$ BEGIN
    IF NOT (SELECT is_called FROM {BASE}) THEN
        PERFORM setval('{BASE}', 0, true);
    END IF;
END $snowflake$""",
        f"CREATE SEQUENCE IF NOT EXISTS {INCARNATION} AS bigint "
        "MINVALUE -9223372036854775808 START 0",
        # First install: the server it runs on is the incarnation it knows. A later install
        # (a re-lease, an upgrade) never acknowledges a new one: the function skips first.
        f"""DO $snowflake$ BEGIN
    IF NOT (SELECT is_called FROM {INCARNATION}) THEN
        PERFORM setval('{INCARNATION}', {incarnation});
    END IF;
EXCEPTION WHEN insufficient_privilege OR undefined_function THEN NULL;
END $snowflake$""",
        f"""CREATE OR REPLACE FUNCTION {FAILOVER}() RETURNS void
LANGUAGE plpgsql VOLATILE AS $snowflake$
-- Once per session: after a promotion or a restore, skip the clock past anything the old
-- primary may have issued whose writes were lost: hold (LEASE_SECONDS) + 2 * lead units past
-- the latest of the wall clock, the replayed clock and the replayed anchor.
DECLARE
    current bigint; known bigint; b bigint; n bigint; a bigint; f bigint;
BEGIN
    BEGIN
        current := {incarnation};
    EXCEPTION WHEN insufficient_privilege OR undefined_function THEN
        current := NULL;  -- a role that may not read it: no failover detection (docs)
    END;
    IF current IS NOT NULL AND current <> (SELECT last_value FROM {INCARNATION}) THEN
        PERFORM pg_advisory_lock({PG_LOCK_KEY});
        BEGIN
            IF current <> (SELECT last_value FROM {INCARNATION}) THEN
                SELECT last_value INTO b FROM {BASE};
                SELECT last_value INTO n FROM {COUNTER};
                SELECT last_value INTO a FROM {ANCHOR};
                f := GREATEST({now_units}, (b + n) >> {sb}, a) + {hold + 2 * lead};
                PERFORM setval('{BASE}', (f << {sb}) - n);
                PERFORM setval('{ANCHOR}', f);
                PERFORM setval('{INCARNATION}', current);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            PERFORM pg_advisory_unlock({PG_LOCK_KEY});
            RAISE;
        END;
        PERFORM pg_advisory_unlock({PG_LOCK_KEY});
    END IF;
    PERFORM set_config('django_snowflake.incarnation', 'seen', false);
END
$snowflake$""",
        f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $snowflake$
-- Layout {layout.fingerprint}, slot {worker}/{datacenter}. An ID is m = base + counter in
-- layout units: time m >> {sb}, sequence m & {layout.max_sequence}. A value is used only if
-- base did not move while the counter was drawn, so values drawn before a move are below
-- those after it; base only grows, moved under a lock nobody waits for.
DECLARE
    b1 bigint; b2 bigint; n bigint; m bigint; t bigint; now_u bigint; a bigint;
BEGIN
    IF current_setting('django_snowflake.incarnation', true) IS DISTINCT FROM 'seen' THEN
        PERFORM {FAILOVER}();
    END IF;
    LOOP
        b1 := {last_base};
        n := nextval('{COUNTER}');
        b2 := {last_base};
        IF b1 IS NULL OR b2 IS NULL THEN
            RAISE EXCEPTION 'django_snowflake_id(): cannot read the sequence {BASE}'
                USING ERRCODE = 'insufficient_privilege',
                HINT = 'Grant SELECT and UPDATE on the django_snowflake_id_* sequences to '
                    'every role that inserts into Snowflake-keyed tables.';
        END IF;
        CONTINUE WHEN b1 <> b2;
        m := b1 + n;
        t := m >> {sb};
        now_u := {now_units};
        IF t < now_u AND pg_try_advisory_lock({PG_LOCK_KEY}) THEN
            -- Behind the wall clock: move base so the next value starts at now_u.
            BEGIN
                SELECT last_value INTO b1 FROM {BASE};
                SELECT last_value INTO n FROM {COUNTER};
                IF b1 + n < (now_u << {sb}) THEN
                    PERFORM setval('{BASE}', (now_u << {sb}) - n);
                    -- The anchor moves every half lead, not at each catch-up: a write less
                    -- per time unit, and a bound half a lead tighter after a step back.
                    IF now_u > (SELECT last_value FROM {ANCHOR}) + {lead // 2} THEN
                        PERFORM setval('{ANCHOR}', now_u);
                    END IF;
                END IF;
            EXCEPTION WHEN OTHERS THEN
                PERFORM pg_advisory_unlock({PG_LOCK_KEY});
                RAISE;
            END;
            PERFORM pg_advisory_unlock({PG_LOCK_KEY});
            CONTINUE;
        END IF;
        IF t > now_u + {lead} THEN
            -- Ahead (a burst, a clock stepped back): at most lead units past the anchor.
            SELECT last_value INTO a FROM {ANCHOR};
            IF t > a + {lead} THEN
                PERFORM pg_sleep((t - {lead} - now_u) * {layout.time_unit_ms} / 1000.0);
            END IF;
        END IF;
        RETURN {compose};
    END LOOP;
END
$snowflake$""",
        f"COMMENT ON FUNCTION {FUNCTION}() IS '{comment}'",
    ]


def _mysql_sql(
    layout: BitLayout, slot: tuple[int, int] | None, alias: str, node: str | None
) -> list[str]:
    from .mysql_function import mysql_function_sql

    return mysql_function_sql(
        layout,
        slot,
        lead_units=lead_units(layout),
        hold_units=hold_units(layout),
        comment=_comment(layout, slot, alias, node),
        refusal=_refusal(alias),
        node=node,
        copied=f"this is Galera node {node}'s function (a state transfer copied it): "
        f"manage.py migrate --database={alias} through this node",
    )


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


# The database's worker slot, leased in the coordination database.


def lease_database_slot(
    alias: str, layout: BitLayout, node: str | None = None
) -> tuple[int, int] | None:
    """The worker slot of database ``alias``'s function (of its Galera node ``node``'s),
    leased for good in ``WorkerNode`` on the coordination database; ``None`` while that
    database has no ``WorkerNode`` table.

    A slot this database already holds is kept. Otherwise the highest worker ID (in
    ``DATACENTER_ID``) that has never had a row is taken with the claim's compare-and-set: an
    INSERT whose unique constraint picks the winner of a race. Processes claim from the lowest
    ID up and never take a lease that does not expire, so the two never meet. Raises
    ``LayoutMismatch`` when the table holds slots of another layout, ``SnowflakeError`` when no
    worker ID is left.
    """
    from .conf import get_settings

    settings = get_settings()
    coordination = settings["DATABASE"]
    WorkerNode = _worker_node()
    datacenter = int(settings["DATACENTER_ID"] or 0)
    nodes = WorkerNode._default_manager.using(coordination)
    try:
        with transaction.atomic(using=coordination):
            other = nodes.exclude(layout=layout.fingerprint).values_list("layout", flat=True)
            mismatch = other.first()
    except DatabaseError:
        return None  # no WorkerNode table (yet) on the coordination database
    if mismatch is not None:
        raise LayoutMismatch(layout.fingerprint, mismatch)
    mine = nodes.filter(host_name=DATABASE_HOST, released_at=None, datacenter_id=datacenter)
    label = database_label(alias, node)
    # The slot of the one database a version before 0.2 leased, labelled "database".
    legacy = (
        mine.filter(label=DATABASE_LABEL) if alias == coordination and node is None else mine.none()
    )
    held = mine.filter(label=label).first()
    if held is None and legacy.update(label=label):
        held = mine.filter(label=label).first()
    if held is not None:
        return held.worker_id, held.datacenter_id
    # Naive datetimes when USE_TZ is False: MySQL's backend refuses aware ones then.
    now = timezone.now()
    never = LEASE_END if django_settings.USE_TZ else LEASE_END.replace(tzinfo=None)
    for worker in range(layout.max_worker_id, -1, -1):
        if nodes.filter(worker_id=worker, datacenter_id=datacenter).exists():
            continue
        try:
            with transaction.atomic(using=coordination):
                nodes.create(
                    worker_id=worker,
                    datacenter_id=datacenter,
                    host_name=DATABASE_HOST,
                    label=label,
                    process_id=0,
                    launched_at=now,
                    heartbeat_at=now,
                    lease_expires_at=never,
                    released_at=None,
                    last_timestamp=0,
                    layout=layout.fingerprint,
                    token=f"database-{os.urandom(8).hex()}",
                )
        except IntegrityError:
            held = mine.filter(label=label).first()
            if held is not None:  # another migrate of this database won the race
                return held.worker_id, held.datacenter_id
            continue  # a process or another database took this one: the next one down
        return worker, datacenter
    raise SnowflakeError(
        f"No worker ID is left for the Snowflake function of {label!r}: all "
        f"{layout.max_worker_id + 1} slots of datacenter {datacenter} have rows in WorkerNode. "
        "Raise WORKER_BITS or use another DATACENTER_ID."
    )


def installed_slot(alias: str) -> tuple[bool, tuple[int, int] | None]:
    """Whether database ``alias`` has the function, and the slot its comment names."""
    comment = _installed_comment(connections[alias])
    if comment is None:
        return False, None
    found = _COMMENT.search(comment)
    if found is None or found.group(1) is None:
        return True, None
    return True, (int(found.group(1)), int(found.group(2)))


def _installed_comment(connection: BaseDatabaseWrapper) -> str | None:
    """The comment of the function installed on ``connection`` (``""`` without one);
    ``None`` when it has no function."""
    if connection.vendor == "postgresql":
        sql = (
            "SELECT obj_description(p.oid, 'pg_proc') FROM pg_proc p "
            "JOIN pg_namespace s ON s.oid = p.pronamespace "
            "WHERE p.proname = %s AND s.nspname = ANY (current_schemas(false))"
        )
    elif connection.vendor == "mysql":
        sql = (
            "SELECT routine_comment FROM information_schema.routines "
            "WHERE routine_schema = DATABASE() AND routine_name = %s"
        )
    else:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql, [FUNCTION])
        row = cursor.fetchone()
    return None if row is None else str(row[0] or "")


def function_sql(connection: BaseDatabaseWrapper) -> list[str]:
    """The statements installing the function on ``connection`` under its leased slot; on a
    Galera node, that node's own (:func:`install_function` installs the other nodes')."""
    from .conf import get_layout

    if connection.vendor not in ("postgresql", "mysql"):
        return []
    layout = get_layout()
    node = galera_node(connection) if connection.vendor == "mysql" else None
    statements = _own_sql(connection, layout, node)
    if node is not None and "node=" not in (_installed_comment(connection) or ""):
        # The first install on the cluster: every node gets a function that refuses, saying
        # what to run, before the nodes migrate reaches get their own.
        statements.insert(0, _galera_refusal(connection.alias, layout))
    return statements


def _own_sql(connection: BaseDatabaseWrapper, layout: BitLayout, node: str | None) -> list[str]:
    slot = lease_database_slot(connection.alias, layout, node)
    return install_sql(connection.vendor, layout, slot, alias=connection.alias, node=node)


def galera_node(connection: BaseDatabaseWrapper) -> str | None:
    """The ``wsrep_node_name`` of the Galera node ``connection`` is on; ``None`` off Galera."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_node_name')"
        )
        variables = {name.lower(): value for name, value in cursor.fetchall()}
    return variables["wsrep_node_name"] if variables.get("wsrep_on") == "ON" else None


def own_label(alias: str) -> str:
    """The ``WorkerNode.label`` the function of database ``alias`` should issue under: its own,
    or its Galera node's."""
    connection = connections[alias]
    return database_label(alias, galera_node(connection) if connection.vendor == "mysql" else None)


def galera_stranger(alias: str) -> bool:
    """Whether the Galera node of database ``alias`` has a function that is not its own:
    another node's, which a state transfer copied there, the refusal of a ``migrate`` that did
    not reach it, or one of a version before the nodes had their own. ``migrate`` through the
    node replaces it."""
    connection = connections[alias]
    if connection.vendor != "mysql":
        return False
    node = galera_node(connection)
    found = re.search(r" node=(.*)$", _installed_comment(connection) or "")
    return node is not None and (found is None or found.group(1) != node)


def _galera_refusal(alias: str, layout: BitLayout) -> str:
    """The function of a Galera node that ``migrate`` did not reach: it refuses, saying what to
    run (replicated to every node, which is why no node lacks the function its triggers call)."""
    from .mysql_function import refusal_sql

    return refusal_sql(
        f"{_comment(layout, None, alias)} node=",
        f"this Galera node has no Snowflake function of its own: manage.py migrate "
        f"--database={alias} while it is in the cluster",
    )


def install_function(editor: BaseDatabaseSchemaEditor) -> None:
    """Install the function through ``editor``; on a Galera node, then on every other node of
    the cluster that ``migrate`` can reach (``wsrep_incoming_addresses``), with the same
    database settings but that node's address. A node it cannot reach keeps its function, or
    the refusal of the first install; the log says which."""
    from .conf import get_layout

    connection = editor.connection
    statements = function_sql(connection)
    peers = _galera_peers(connection) if _LOCAL in statements and not editor.collect_sql else {}
    try:
        _run(connection, statements, lambda statement: editor.execute(statement, params=None))
        for address, (peer, node) in peers.items():
            if node is not None:
                try:
                    with peer.cursor() as cursor:
                        # The node has applied the refusal of a first install before it
                        # replaces it.
                        cursor.execute("SET SESSION wsrep_sync_wait = 1")
                        cursor.execute("SELECT 1")
                        cursor.execute("SET SESSION wsrep_sync_wait = DEFAULT")
                        _run(peer, _own_sql(connection, get_layout(), node), cursor.execute)
                    continue
                except DatabaseError:
                    pass
            logger.warning(
                "The Snowflake function of database %r was not installed on Galera node %s: "
                "it keeps the function it has, which refuses unless an earlier migrate "
                "installed its own, until migrate runs through that node.",
                connection.alias,
                node or f"{address} (unreachable)",
            )
    finally:
        for peer, _node in peers.values():
            peer.close()


# The statement before a Galera node's own function, which no other node may have.
_LOCAL = "SET SESSION wsrep_on = OFF"


def _run(connection: BaseDatabaseWrapper, statements: list[str], execute: Any) -> None:
    """``execute`` each statement; the session replicates again after a Galera node's own
    function, even when a statement failed."""
    try:
        for statement in statements:
            execute(statement)
    finally:
        if _LOCAL in statements:
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION wsrep_on = ON")


def _galera_peers(
    connection: BaseDatabaseWrapper,
) -> dict[str, tuple[BaseDatabaseWrapper, str | None]]:
    """A connection to each other node of ``connection``'s Galera cluster, by address, and its
    ``wsrep_node_name`` (``None``: it could not be reached). Raises ``SnowflakeError`` when two
    nodes have one name: their functions would draw the same sequences under the same slot."""
    identity = (
        "SELECT @@wsrep_node_name, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
        "WHERE VARIABLE_NAME = 'WSREP_GCOMM_UUID'"
    )
    with connection.cursor() as cursor:
        cursor.execute("SHOW STATUS LIKE 'wsrep_incoming_addresses'")
        row = cursor.fetchone()
        cursor.execute(identity)
        here, me = cursor.fetchone()
    peers: dict[str, tuple[BaseDatabaseWrapper, str | None]] = {}
    try:
        for address in str(row[1] if row else "").split(","):
            host, _, port = address.strip().rpartition(":")
            if not host or not port.isdigit():
                continue  # "AUTO" or empty: a node that does not say where it listens
            options = {"connect_timeout": 5, **connection.settings_dict["OPTIONS"]}
            settings = {**connection.settings_dict, "HOST": host, "PORT": port, "OPTIONS": options}
            peer = type(connection)(settings)
            try:
                with peer.cursor() as cursor:
                    cursor.execute(identity)
                    node, uuid = cursor.fetchone()
            except DatabaseError:
                peers[address] = (peer, None)
                continue
            if uuid == me:
                peer.close()  # the node migrate runs through
            elif node == here or node in [name for _, name in peers.values()]:
                peer.close()
                raise SnowflakeError(
                    f"Two nodes of the Galera cluster are named {node!r} (wsrep_node_name): "
                    "each node's Snowflake function needs a name of its own."
                )
            else:
                peers[address] = (peer, node)
    except BaseException:
        for peer, _node in peers.values():
            peer.close()
        raise
    return peers


def slot_holder(slot: tuple[int, int]) -> str | None:
    """The label the coordination database records for ``slot``, ``None`` without a row."""
    from .conf import get_settings

    label: str | None = (
        _worker_node()
        ._default_manager.using(get_settings()["DATABASE"])
        .filter(worker_id=slot[0], datacenter_id=slot[1])
        .values_list("label", flat=True)
        .first()
    )
    return label


def reinstall_after_migrate(using: str, **kwargs: Any) -> None:
    """``post_migrate``: give a database whose function has no slot of its own (it was
    migrated before the coordination database) or another's (it is a copy of another database,
    or on a Galera node of another node's, by a state transfer) one, now that ``migrate`` runs
    on it again (through that node: the others are then installed too).

    A slot whose row is gone (a test runner's flush of ``WorkerNode``, which sends
    ``post_migrate`` too) is left as it is: the function keeps issuing under it.
    """
    from django.apps import apps

    connection = connections[using]
    # A test's available_apps may leave the package out of the registry it migrates.
    if connection.vendor not in ("postgresql", "mysql") or not apps.is_installed(__package__):
        return
    try:
        exists, slot = installed_slot(using)
        if not exists:
            return
        if slot is not None and slot_holder(slot) in (None, own_label(using)):
            return
    except DatabaseError:
        return
    with connection.schema_editor() as editor:
        install_function(editor)


class _DatabaseOperation(Operation):
    """An operation on the database alone: it changes no model state, and reversing it
    keeps what it made (columns may still default to the function)."""

    reduces_to_sql = True
    reversible = True

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass

    def database_backwards(self, *args: Any) -> None:
        pass


class InstallDatabaseFunction(_DatabaseOperation):
    """Create ``django_snowflake_id()`` (and its sequences) for the project's layout, under
    the slot leased for this database."""

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: Any,
        to_state: Any,
    ) -> None:
        install_function(schema_editor)

    def describe(self) -> str:
        return "Install the database's Snowflake function django_snowflake_id()"


class AddDatabaseDefaults(_DatabaseOperation):
    """Give every existing table keyed by a Snowflake primary key the database's function as
    its key's default (its trigger on MariaDB): tables made before ``SnowflakeField`` primary
    keys had one, so raw SQL that leaves the key out works on every Snowflake-keyed table.

    Tables created later get it from the schema editor. Idempotent.
    """

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: Any,
        to_state: Any,
    ) -> None:
        connection = schema_editor.connection
        tables = set(connection.introspection.table_names())
        # The migration state, not the models: with the switch turned on, a model whose
        # migrations made an AutoField column reports a SnowflakeAutoField at run time.
        for model in to_state.apps.get_models(include_auto_created=True):
            pk = model._meta.pk
            if (
                model._meta.app_label not in to_state.real_apps  # made just now, as they are
                and _is_database_keyed(pk)
                and model._meta.db_table in tables
                and router.allow_migrate_model(connection.alias, model)
            ):
                schema_editor._snowflake_default(model, pk)  # type: ignore[attr-defined]

    def describe(self) -> str:
        return "Give every Snowflake primary key the database's django_snowflake_id() default"


# The schema editor of every connection.


def _is_database_keyed(field: Any) -> bool:
    # Snowflake fields have the attribute (fields.py imports this module, not back); only a
    # primary key gets the default, and a copy whose class was changed has neither.
    return getattr(field, "has_database_default", False) is True and field.primary_key


class SnowflakeSchemaEditorMixin:
    """Writes the function, the column defaults and (MariaDB) the triggers of Snowflake
    primary keys, in ``migrate`` and ``sqlmigrate`` alike."""

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
        q = self.quote_name  # type: ignore[attr-defined]
        vendor = self.connection.vendor
        if vendor == "postgresql":
            self.execute(  # type: ignore[attr-defined]
                f"ALTER TABLE {q(table)} ALTER COLUMN {q(column)} SET DEFAULT {FUNCTION}()"
            )
        elif vendor == "mysql":
            self.execute(f"ALTER TABLE {q(table)} ALTER COLUMN {q(column)} SET DEFAULT 0")  # type: ignore[attr-defined]
            self.execute(drop_trigger_sql(self, table))  # type: ignore[attr-defined, arg-type]
            self.execute(create_trigger_sql(self, table, column))  # type: ignore[attr-defined, arg-type]

    def _snowflake_plain_bigint(self, table: str, column: str) -> bool:
        """Whether ``table.column`` is a bigint with no identity or auto-increment of its own
        (a column a migration made for an AutoField keeps its sequence: the project has not
        migrated it to a Snowflake key yet, docs/migrating.rst)."""
        vendor = self.connection.vendor
        with self.connection.cursor() as cursor:
            if vendor == "postgresql":
                cursor.execute(
                    "SELECT data_type, is_identity, coalesce(column_default, '') "
                    "FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = %s AND column_name = %s",
                    [table, column],
                )
                row = cursor.fetchone()
                if row is None:
                    return False  # no such column: nothing of ours to give a default
                kind, identity, default = row
                return kind == "bigint" and identity == "NO" and "nextval" not in default
            if vendor == "mysql":
                cursor.execute(
                    "SELECT data_type, extra FROM information_schema.columns "
                    "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = %s",
                    [table, column],
                )
                row = cursor.fetchone()
                return (
                    row is not None
                    and row[0] == "bigint"
                    and "auto_increment" not in row[1].lower()
                )
            return False  # SQLite: see _snowflake_default

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
    claim that fails before an INSERT (no table before ``migrate``, another writer holding the
    lock past the busy timeout) is tried again before a statement at least a second later,
    so the connection recovers once the cause is gone.
    """
    failed_at = getattr(connection, "_snowflake_claim_failed_at", None)
    if failed_at is not None and time.monotonic() - failed_at < CLAIM_RETRY_SECONDS:
        return
    if threading.current_thread().name.startswith("snowflake-"):
        return  # the allocator's own connection
    from . import runtime

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
        connection._snowflake_claim_failed_at = None  # type: ignore[attr-defined]


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
