"""``django_snowflake_id()`` on PostgreSQL: a PL/pgSQL function over sequences.

Sequences are non-transactional: a rollback never lowers the clock. An ID is ``base +
counter`` read in layout units (time, then sequence), so the logical clock never goes back,
whatever the server's clock does. A value at most ``slack`` (10 ms) behind the wall clock is
returned as drawn. A session further behind moves ``base`` up to the clock if it takes an
advisory lock *without waiting* (``pg_try_advisory_xact_lock``) and draws again; a session that
finds the lock taken (another is catching up) returns its value if it is at most ``lag`` (25
ms) behind, else sleeps a millisecond and draws again, so no key is returned from long before
a catch-up (an idle pause), and nobody queues on the lock: the convoy of a lock every session
waits on at each new millisecond cannot form. The lock is held only inside one block of one
call, a subtransaction that always ends in a rollback (:data:`DONE`), which releases it
whatever ends the block, cancels included, with no handler code to run: it never outlives the
statement, nor does the caller's transaction hold it. A burst may run ahead of the clock by ``lead`` units past the ``anchor``
(a catch-up point, raised every half lead); beyond, the function sleeps until the clock is
there. On the first call of a session it compares the server's incarnation (system identifier
and timeline, as the process leases do) with the one it last saw; after a promotion or a
restore it skips its clock past anything the old primary could have issued: past ``max(now,
replayed clock, replayed anchor) + hold + 2 * lead``, where ``hold`` is ``LEASE_SECONDS``, the
replication lag (and clock skew) it tolerates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from ..layout import BitLayout
from .base import FUNCTION, Key, Quote, ServerDatabase, comment, hold_units, lead_units, refusal

COUNTER = "django_snowflake_id_counter"
BASE = "django_snowflake_id_base"
ANCHOR = "django_snowflake_id_anchor"
INCARNATION = "django_snowflake_id_incarnation"
FAILOVER = "django_snowflake_id_failover"
# pg_advisory_lock key of the catch-up: the first 8 bytes of sha1("django_snowflake_id").
PG_LOCK_KEY = int.from_bytes(hashlib.sha1(FUNCTION.encode()).digest()[:8], "big", signed=True)
# How far behind the wall clock a drawn value is returned as it is: catch-ups (and the
# subtransaction of the block that holds their lock) once per this many milliseconds, not at
# every new one.
SLACK_MS = 10
# How far behind a session that finds another catching up returns its value all the same
# (under load, values 10 to 11 ms behind, at every catch-up): the rest of the 50 ms that a key
# may be behind the server's clock is margin for the caller's statement.
LAG_MS = 25
# How long a session behind the clock waits for another's catch-up before it returns its value
# anyway (unique, behind): a catch-up holds the lock for microseconds, so only a holder that is
# not catching up (a session that took the key outside the function, or one an earlier version
# of the function left holding it after a cancel) keeps it that long.
CATCH_UP_WAIT_MS = 100
# The catch-up's lock is a transaction-level lock taken inside a block (a subtransaction) that
# always ends in a rollback: the block raises DONE at its end and its handler catches it, and
# anything else that ends it (a cancel, a statement_timeout, an error, a second cancel on top
# of the first) rolls it back as well. The rollback releases the lock, and the setvals stay
# (sequences are not transactional): no code has to run for the lock to go, so it never
# outlives the statement, nor lives on in the caller's transaction.
DONE = "SF001"


def schema() -> str:
    """The one schema of the database that holds the function and its sequences
    (``SNOWFLAKE["FUNCTION_SCHEMA"]``), whatever schema a ``migrate`` or a caller is in."""
    from ..conf import get_settings

    return str(get_settings()["FUNCTION_SCHEMA"])


def qualified(name: str) -> str:
    """``name`` in :func:`schema`, quoted, for SQL the package writes."""
    quoted = schema().replace('"', '""')
    return f'"{quoted}".{name}'


def installed_comment_sql() -> tuple[str, list[str]]:
    """The query of the comment of the function in :func:`schema` (no row: none there)."""
    return (
        "SELECT obj_description(p.oid, 'pg_proc') FROM pg_proc p "
        "JOIN pg_namespace s ON s.oid = p.pronamespace WHERE p.proname = %s AND s.nspname = %s",
        [FUNCTION, schema()],
    )


def create_schema_sql() -> str:
    """Create :func:`schema` if the database lacks it.

    Only then: ``CREATE SCHEMA IF NOT EXISTS`` needs the CREATE privilege on the database even
    when the schema exists, which a migrating role of a managed database may not have. Nothing
    is granted on it: the roles that insert need ``USAGE`` on it, as they need ``SELECT`` and
    ``UPDATE`` on the sequences (docs/schemas.rst); ``public`` has ``USAGE`` for everyone.
    """
    name = schema()
    literal, identifier = name.replace("'", "''"), name.replace('"', '""')
    return f"""DO $snowflake$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = '{literal}') THEN
        CREATE SCHEMA "{identifier}";
    END IF;
EXCEPTION WHEN duplicate_schema OR unique_violation THEN NULL;  -- a concurrent migrate made it
END $snowflake$"""


# Type, identity and default of a column (parameters: table, column).
COLUMN_SQL = (
    "SELECT data_type, is_identity, coalesce(column_default, '') "
    "FROM information_schema.columns WHERE table_schema = current_schema() "
    "AND table_name = %s AND column_name = %s"
)


def plain_bigint(row: tuple[str, ...]) -> bool:
    """Whether the :data:`COLUMN_SQL` row is a bigint with no sequence or identity of its own."""
    kind, identity, default = row
    return kind == "bigint" and identity == "NO" and "nextval" not in default


def key_default_sql(quote_name: Callable[[str], str], table: str, column: str) -> list[str]:
    """Give an existing column the function as its default (the one in :func:`schema`,
    whatever schema the table is in)."""
    return [
        f"ALTER TABLE {quote_name(table)} ALTER COLUMN {quote_name(column)} "
        f"SET DEFAULT {qualified(FUNCTION)}()"
    ]


def key_changed_sql(
    quote_name: Callable[[str], str], table: str, old: str | None, new: str | None
) -> list[str]:
    """Nothing: the column's DEFAULT, written with the column, is the whole of it."""
    return []


def install_sql(
    layout: BitLayout, slot: tuple[int, int] | None, *, alias: str, node: str | None = None
) -> list[str]:
    """The statements of :meth:`PostgreSQL.install_sql`."""
    description = comment(layout, slot, alias)
    # Every name qualified and the path pinned: what the function draws never depends on the
    # caller's search_path (PostgreSQL's "Writing SECURITY DEFINER Functions Safely").
    function, failover = qualified(FUNCTION), qualified(FAILOVER)
    counter, base, anchor = qualified(COUNTER), qualified(BASE), qualified(ANCHOR)
    incarnation_seq = qualified(INCARNATION)
    literal = {name: name.replace("'", "''") for name in (counter, base, anchor, incarnation_seq)}
    pinned = "SET search_path = pg_catalog, pg_temp"
    if slot is None:
        message = refusal(alias).replace("'", "''")
        return [
            create_schema_sql(),
            f"""CREATE OR REPLACE FUNCTION {function}() RETURNS bigint
LANGUAGE plpgsql VOLATILE {pinned} AS $snowflake$
BEGIN
    RAISE EXCEPTION '{message}' USING ERRCODE = 'object_not_in_prerequisite_state';
END
$snowflake$""",
            f"COMMENT ON FUNCTION {function}() IS '{description}'",
        ]
    worker, datacenter = slot
    sb = layout.sequence_bits
    lead = lead_units(layout)
    hold = hold_units(layout)
    slack = SLACK_MS // layout.time_unit_ms
    lag = LAG_MS // layout.time_unit_ms
    wait = max(1, CATCH_UP_WAIT_MS // layout.time_unit_ms)
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
    last_base = f"pg_sequence_last_value('{literal[base]}'::regclass)"
    return [
        create_schema_sql(),
        f"CREATE SEQUENCE IF NOT EXISTS {counter} AS bigint MINVALUE 0 START 0",
        f"CREATE SEQUENCE IF NOT EXISTS {base} AS bigint MINVALUE 0 START 0",
        f"CREATE SEQUENCE IF NOT EXISTS {anchor} AS bigint MINVALUE 0 START 0",
        # Base has a value from the start (0 until the first catch-up), so a NULL read is
        # an error, not "never moved".
        f"""DO $snowflake$ BEGIN
    IF NOT (SELECT is_called FROM {base}) THEN
        PERFORM setval('{literal[base]}', 0, true);
    END IF;
END $snowflake$""",
        f"CREATE SEQUENCE IF NOT EXISTS {incarnation_seq} AS bigint "
        "MINVALUE -9223372036854775808 START 0",
        # First install: the server it runs on is the incarnation it knows. A later install
        # (a re-lease, an upgrade) never acknowledges a new one: the function skips first.
        f"""DO $snowflake$ BEGIN
    IF NOT (SELECT is_called FROM {incarnation_seq}) THEN
        PERFORM setval('{literal[incarnation_seq]}', {incarnation});
    END IF;
EXCEPTION WHEN insufficient_privilege OR undefined_function THEN NULL;
END $snowflake$""",
        f"""CREATE OR REPLACE FUNCTION {failover}() RETURNS void
LANGUAGE plpgsql VOLATILE {pinned} AS $snowflake$
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
    IF current IS NOT NULL AND current <> (SELECT last_value FROM {incarnation_seq}) THEN
        BEGIN
            -- The one wait on the lock, once per session and only after a new incarnation:
            -- a catch-up holds it for microseconds.
            PERFORM pg_advisory_xact_lock({PG_LOCK_KEY});
            IF current <> (SELECT last_value FROM {incarnation_seq}) THEN
                SELECT last_value INTO b FROM {base};
                SELECT last_value INTO n FROM {counter};
                SELECT last_value INTO a FROM {anchor};
                f := GREATEST({now_units}, (b + n) >> {sb}, a) + {hold + 2 * lead};
                PERFORM setval('{literal[base]}', (f << {sb}) - n);
                PERFORM setval('{literal[anchor]}', f);
                PERFORM setval('{literal[incarnation_seq]}', current);
            END IF;
            RAISE SQLSTATE '{DONE}';
        EXCEPTION WHEN SQLSTATE '{DONE}' THEN
            NULL;
        END;
    END IF;
    -- A cache of this server session's own check, not of a client's: a server session never
    -- sees a new incarnation (on a standby the check fails before this line, and a restore
    -- starts new sessions), so whichever client of a pooled connection finds it set may skip
    -- the check. Losing it (DISCARD ALL, a rollback) costs one check more.
    PERFORM set_config('django_snowflake.incarnation', 'seen', false);
END
$snowflake$""",
        f"""CREATE OR REPLACE FUNCTION {function}() RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE {pinned} AS $snowflake$
-- Layout {layout.fingerprint}, slot {worker}/{datacenter}. An ID is m = base + counter in
-- layout units: time m >> {sb}, sequence m & {layout.max_sequence}. A value is used only if
-- base did not move while the counter was drawn, so values drawn before a move are below
-- those after it; base only grows, moved under a lock nobody waits for.
DECLARE
    b1 bigint; b2 bigint; n bigint; m bigint; t bigint; now_u bigint; a bigint;
    caught boolean; waited_since bigint;
BEGIN
    IF current_setting('django_snowflake.incarnation', true) IS DISTINCT FROM 'seen' THEN
        PERFORM {failover}();
    END IF;
    LOOP
        b1 := {last_base};
        n := nextval('{literal[counter]}');
        b2 := {last_base};
        IF b1 IS NULL OR b2 IS NULL THEN
            RAISE EXCEPTION 'django_snowflake_id(): cannot read the sequence {base}'
                USING ERRCODE = 'insufficient_privilege',
                HINT = 'Grant SELECT and UPDATE on the django_snowflake_id_* sequences to '
                    'every role that inserts into Snowflake-keyed tables.';
        END IF;
        CONTINUE WHEN b1 <> b2;
        m := b1 + n;
        t := m >> {sb};
        now_u := {now_units};
        IF t < now_u - {slack} THEN
            -- Behind the wall clock: move base so the next value starts at now_u, under a
            -- lock taken without waiting and released in this block whatever happens.
            caught := false;
            BEGIN
                IF pg_try_advisory_xact_lock({PG_LOCK_KEY}) THEN
                    SELECT last_value INTO b1 FROM {base};
                    SELECT last_value INTO n FROM {counter};
                    IF b1 + n < (now_u << {sb}) THEN
                        PERFORM setval('{literal[base]}', (now_u << {sb}) - n);
                        -- The anchor moves every half lead, not at each catch-up: a write
                        -- less per time unit, and a bound half a lead tighter after a step back.
                        IF now_u > (SELECT last_value FROM {anchor}) + {lead // 2} THEN
                            PERFORM setval('{literal[anchor]}', now_u);
                        END IF;
                    END IF;
                    RAISE SQLSTATE '{DONE}';
                END IF;
            EXCEPTION WHEN SQLSTATE '{DONE}' THEN
                caught := true;
            END;
            CONTINUE WHEN caught;
            -- Another session is catching up: further behind than lag, draw again after it,
            -- without waiting on the lock. Only a lock held far longer than a catch-up (not
            -- by one) lets such a value go out, after {wait} units.
            waited_since := coalesce(waited_since, now_u);
            IF t < now_u - {lag} AND now_u < waited_since + {wait} THEN
                PERFORM pg_sleep(0.001);  -- pg_sleep waits whole milliseconds
                CONTINUE;
            END IF;
        END IF;
        IF t > now_u + {lead} THEN
            -- Ahead (a burst, a clock stepped back): at most lead units past the anchor.
            SELECT last_value INTO a FROM {anchor};
            IF t > a + {lead} THEN
                PERFORM pg_sleep((t - {lead} - now_u) * {layout.time_unit_ms} / 1000.0);
            END IF;
        END IF;
        RETURN {compose};
    END LOOP;
END
$snowflake$""",
        f"COMMENT ON FUNCTION {function}() IS '{description}'",
    ]


# Every django_snowflake_id() of the database, wherever it is: its oid, schema and whether it
# pins its search_path (before migration 0005, one per schema a migrate ran in, unpinned).
COPIES_SQL = (
    "SELECT p.oid, s.nspname, coalesce(array_to_string(p.proconfig, ' '), '') "
    "LIKE '%%search_path=%%' FROM pg_catalog.pg_proc p "
    "JOIN pg_catalog.pg_namespace s ON s.oid = p.pronamespace "
    "WHERE p.proname = %s AND p.pronargs = 0 ORDER BY s.nspname"
)

# The columns whose DEFAULT calls the function of oid %s (schema, table, column).
DEPENDENT_DEFAULTS_SQL = (
    "SELECT s.nspname, c.relname, a.attname FROM pg_catalog.pg_depend d "
    "JOIN pg_catalog.pg_attrdef ad ON ad.oid = d.objid "
    "JOIN pg_catalog.pg_class c ON c.oid = ad.adrelid "
    "JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum "
    "WHERE d.classid = 'pg_catalog.pg_attrdef'::regclass "
    "AND d.refclassid = 'pg_catalog.pg_proc'::regclass AND d.refobjid = %s "
    "ORDER BY 1, 2, 3"
)


def copies(connection: BaseDatabaseWrapper) -> list[tuple[int, str, bool]]:
    """Every ``django_snowflake_id()`` of ``connection``'s database: ``(oid, schema, pinned)``,
    ``pinned`` saying whether it pins its ``search_path``."""
    with connection.cursor() as cursor:
        cursor.execute(COPIES_SQL, [FUNCTION])
        return [(int(oid), str(name), bool(pinned)) for oid, name, pinned in cursor.fetchall()]


def _in(name: str, schema_name: str) -> str:
    quoted = schema_name.replace('"', '""')
    return f'"{quoted}".{name}'


def repair_sql(connection: BaseDatabaseWrapper, layout: BitLayout) -> list[str]:
    """The statements that leave the database one function, the one in :func:`schema` (which
    must exist): every column default that calls another copy calls it instead; its clock skips
    past every other copy's (their sequences' ``(base + counter) >> sequence_bits`` and anchor,
    plus a lead, as a failover skips); the other copies' functions and sequences are dropped.
    ``[]`` when there is no other copy. The skip is computed when it runs, so what ``sqlmigrate``
    prints is what ``migrate`` runs."""
    others = [(oid, name) for oid, name, _ in copies(connection) if name != schema()]
    if not others:
        return []
    quote = connection.ops.quote_name
    survivor = qualified(FUNCTION)
    statements = []
    # Defaults first: ALTER TABLE waits for the inserts running on the table, and holds it until
    # commit, so no key the old copy issues afterwards escapes the skip below.
    with connection.cursor() as cursor:
        for oid, _ in others:
            cursor.execute(DEPENDENT_DEFAULTS_SQL, [oid])
            statements += [
                f"ALTER TABLE {quote(table_schema)}.{quote(table)} "
                f"ALTER COLUMN {quote(column)} SET DEFAULT {survivor}()"
                for table_schema, table, column in cursor.fetchall()
            ]
    sb = layout.sequence_bits
    reads = []
    for _, name in others:
        base, counter, anchor = (_in(n, name) for n in (BASE, COUNTER, ANCHOR))
        exists = " AND ".join(
            f"to_regclass('{n.replace(chr(39), chr(39) * 2)}') IS NOT NULL"
            for n in (base, counter, anchor)
        )
        # A copy that refused (no slot) has no sequences: nothing to skip past.
        reads.append(
            f"""    IF {exists} THEN
        SELECT GREATEST(f, (b.last_value + c.last_value) >> {sb}, a.last_value) INTO f
        FROM {base} b, {counter} c, {anchor} a;
    END IF;"""
        )
    literal = {n: qualified(n).replace("'", "''") for n in (BASE, ANCHOR)}
    statements.append(
        f"""DO $snowflake$
DECLARE
    f bigint := -1; n bigint; b bigint;
BEGIN
{chr(10).join(reads)}
    IF f >= 0 THEN
        -- The catch-up's lock: no session moves base from a value read before this move.
        PERFORM pg_advisory_xact_lock({PG_LOCK_KEY});
        f := f + {lead_units(layout)};
        SELECT last_value INTO b FROM {qualified(BASE)};
        SELECT last_value INTO n FROM {qualified(COUNTER)};
        IF b + n < (f << {sb}) THEN
            PERFORM setval('{literal[BASE]}', (f << {sb}) - n);
        END IF;
        IF (SELECT last_value FROM {qualified(ANCHOR)}) < f THEN
            PERFORM setval('{literal[ANCHOR]}', f);
        END IF;
    END IF;
END $snowflake$"""
    )
    for _, name in others:
        statements.append(f"DROP FUNCTION {_in(FUNCTION, name)}()")
        statements.append(f"DROP FUNCTION IF EXISTS {_in(FAILOVER, name)}()")
        sequences = ", ".join(_in(n, name) for n in (COUNTER, BASE, ANCHOR, INCARNATION))
        statements.append(f"DROP SEQUENCE IF EXISTS {sequences}")
    return statements


def clock_sql(layout: BitLayout, node: None = None) -> str:
    """The query of how far (ms) the function's clock, the time of its last key, is behind the
    server's now (negative: ahead, a burst's lead). ``node`` is MariaDB's (a Galera node)."""
    now_units = (
        f"floor((extract(epoch from clock_timestamp()) * 1000 - {layout.epoch_ms})"
        f" / {layout.time_unit_ms})::bigint"
    )
    return (
        f"SELECT ({now_units} - ((b.last_value + c.last_value) >> {layout.sequence_bits}))"
        f" * {layout.time_unit_ms} FROM {qualified(BASE)} b, {qualified(COUNTER)} c"
    )


class PostgreSQL(ServerDatabase):
    """PostgreSQL: the function above, in ``SNOWFLAKE["FUNCTION_SCHEMA"]``; the lease reads
    the server's clock, its system identifier and timeline; ``COPY`` loads in bulk."""

    supported = True

    display_name = "PostgreSQL"
    bulk_loader_class = "django_snowflake.bulk.postgresql.PostgreSQLLoader"
    now_sql = "SELECT EXTRACT(EPOCH FROM STATEMENT_TIMESTAMP())"
    epoch_template = "EXTRACT(EPOCH FROM {})"
    column_sql = COLUMN_SQL

    def install_sql(
        self, layout: BitLayout, slot: tuple[int, int] | None, node: str | None = None
    ) -> list[str]:
        return install_sql(layout, slot, alias=self.alias)

    def slot_to_keep(self) -> tuple[int, int] | None:
        # The slot its function already has, if the worker table it reads records that slot
        # for nobody (see lease_database_slot).
        return self.function_slot()[1]

    def comment_query(self) -> tuple[str, list[str]]:
        return installed_comment_sql()

    def is_plain_bigint(self, row: tuple[str, ...]) -> bool:
        return plain_bigint(row)

    def column_default_sql(self, key_default: Callable[[], str | None] | None = None) -> str:
        # The database's one function, whatever schema the table is made in (a tenant's).
        return f"{qualified(FUNCTION)}()"

    def key_default_sql(self, quote: Quote, table: str, column: str, default: Key) -> list[str]:
        return key_default_sql(quote, table, column)

    def needs_repair(self) -> bool:
        return any(name != schema() or not pinned for name, pinned in self.function_copies())

    def repair(self, editor: BaseDatabaseSchemaEditor) -> None:
        from ..conf import get_layout

        if not self.needs_repair():
            return
        if not any(name == schema() and pinned for name, pinned in self.function_copies()):
            self.install(editor)
        for statement in repair_sql(self.connection, get_layout()):
            editor.execute(statement, params=None)

    def function_copies(self) -> list[tuple[str, bool]]:
        return [(name, pinned) for _, name, pinned in copies(self.connection)]

    def function_schema(self) -> str | None:
        return schema()

    def where(self) -> str:
        return f"schema {schema()}"

    def clock_sql(self, layout: BitLayout) -> str | None:
        return clock_sql(layout)

    def incarnation(self) -> tuple[str, bool]:
        # The timeline of pg_control_checkpoint() lags a promotion until the next checkpoint;
        # the name of the WAL file being written starts with the current one. A promotion or a
        # point-in-time restore starts a timeline above 1.
        with self.connection.cursor() as cursor:
            cursor.execute(
                "SELECT system_identifier, pg_walfile_name(pg_current_wal_lsn()) "
                "FROM pg_control_system()"
            )
            system, walfile = cursor.fetchone()
        timeline = int(walfile[:8], 16)
        return f"{system}/{timeline}", timeline == 1

    def count_standbys(self, cursor: Any) -> int | None:
        # Without pg_read_all_stats the columns other than the pid read NULL.
        cursor.execute("SELECT sync_state FROM pg_stat_replication")
        states = [state for (state,) in cursor.fetchall()]
        if None in states:
            return None
        return sum(state in ("async", "potential") for state in states)
