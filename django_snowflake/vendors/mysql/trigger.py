"""MariaDB's strict path, ``SNOWFLAKE["MARIADB_KEYS"] = "trigger"``: a trigger and a function
over sequences, and what both paths share (the names, the incarnation, the refusal).

**The trigger** (``"trigger"``) and the function described below: the strict path, kept for raw
writers that need the failover skip inside the INSERT, at the cost measured in
docs/performance.rst. A stored function may not be a column default, so a ``BEFORE INSERT``
trigger on each keyed table gives the key to a row that arrives without one (NULL or 0, as with
``AUTO_INCREMENT``).

MariaDB prelocks, for the whole triggering statement, every table a trigger's function may
touch, and a MyISAM, Aria or MEMORY table is locked whole: a base kept in one serialised every
keyed INSERT of the database behind the longest statement. An InnoDB table is no way out: a
function called from an INSERT reads its rows with locks held to commit (exclusive ones when
the function may also write the table). So the function touches sequences only, which are read
and drawn without a lock that anyone waits for:

- **The clock** is ``m = base + counter`` in layout units (time ``m >> sequence_bits``, the
  sequence below). ``counter`` is one sequence, drawn by every call. ``base`` is a
  :class:`Digits` number: the sum of ``NOCACHE`` sequences ``base_0``, ``base_1``, ... moving
  by 1, 64, 4096, ... time units, read through their tables (``next_not_cached_value``, the
  latest value, never a snapshot). ``SETVAL`` takes only literals and a function may not run
  dynamic SQL, so the function moves ``base`` only by drawing them, digit by digit: a catch-up
  after an idle hour is a few dozen draws, the catch-up of a busy server one.
- **Unique, lock-free**: a call reads ``base``, draws ``counter``, reads ``base`` again and
  uses the value only if the two reads agree. It reads ``base_0`` and caches the other digits,
  which a catch-up moves only while the sequence ``version`` is odd (a sequence lock: the cache
  holds while ``version`` is even and unchanged). Every digit only grows, so equal reads mean
  none moved across the draw: ``base`` had that value at the instant of the draw. Draws are
  totally ordered and ``base`` never falls, so ``m`` grows strictly with the draws: no two
  calls get the same ``m``, whatever the clock does, in any transaction. A sequence draw is
  not transactional (no row lock held to commit, nothing a ROLLBACK undoes, no warning 1196)
  and takes no lock that a writer of another table waits for.
- **Following the wall clock** (``SYSDATE()``, the real time even within a long statement; it
  ignores ``SET TIMESTAMP``): a call whose ``m`` is behind it catches ``base`` up, under
  ``GET_LOCK(name, 0)`` so that one session moves it at a time; a session that does not get
  the lock returns its value, unique and slightly behind (at most :data:`FRESH_MS`), rather
  than queue; further behind, after an idle pause, it waits for the lock up to
  :data:`CATCH_UP_WAIT_S` and draws again above the catch-up. A call interrupted while it
  holds the lock (``KILL``, ``max_statement_time``: no handler runs) leaves it to its
  session, which lets it go at its next catch-up, or as its connection closes. Meanwhile a
  session behind the clock that finds the holder running no statement (``Sleep`` in the
  process list) catches up in its place, under a second lock named after the holder, which
  the holder also takes before it lets the first go: two sessions never move ``base`` at
  once, and keys stay at the clock. Where the function's definer may not see the holder's
  connection (another user's, without ``PROCESS``), the others' keys stay unique but fall
  behind the clock until the holder lets go, each call behind it waiting
  :data:`CATCH_UP_WAIT_S`.
- **A bound on the lead**: the number ``mark`` holds the last catch-up or skip point ``P``
  (raised every half lead, rounding down). The function never returns a key whose time is
  more than ``lead`` units past ``max(now, P)``: a burst that runs further waits
  (``DO SLEEP``) for the clock.
- **Failover and restore**: the number ``seen`` records the incarnation of the server
  (:data:`MYSQL_INCARNATION_SQL`) the clock last skipped for, as its CRC32 modulo ``2**32``.
  A session's first call compares it (then caches the answer in a user variable); on a new
  incarnation, one session (the others wait for it on ``GET_LOCK``) skips the clock to
  ``max(now, replayed m, replayed P) + hold + 2 * lead`` before its first key and records
  it: every key of the old server whose write was lost is below (those keys were at most
  ``lead`` past ``max(its clock, P)``). The record is not transactional either: a caller's
  ROLLBACK keeps it.
- **Cost**: MariaDB opens and locks, for every statement that may call the function, each
  sequence the function may touch, whether the call reaches it or not. Measured at 8
  connections, a trigger whose function references 1, 12 or 24 sequences inserts 2,656, 1,195
  or 697 rows/s (``AUTO_INCREMENT``: 3,273), so every number has as few digits as its draws
  allow: 15 sequences with the ``twitter`` layout. That, not waiting, bounds the throughput of
  keyed INSERTs: no statement waits for another's, but each pays for the 15 sequences.

The install statements are idempotent, and carry the clock of earlier versions (a one-row
MyISAM table ``base`` beside the same ``counter``) over before they drop it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable

from ...layout import BitLayout
from ..base import FUNCTION

#: The one-row table of the base in earlier versions (MyISAM), carried over and dropped.
OLD_BASE = "django_snowflake_id_base"
#: Which server the clock runs on: the incarnation of ``allocators.database``.
MYSQL_INCARNATION_SQL = "CONCAT(@@server_id, '@', @@hostname, ':', @@port)"
#: Which run of a Galera node the clock runs on: ``wsrep_gcomm_uuid`` is new at every start
#: (a status variable: read once per session).
GALERA_INCARNATION_SQL = (
    "CONCAT(@@wsrep_node_name, '@', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME = 'WSREP_GCOMM_UUID'))"
)
#: The names of the server's sequences; a Galera node's carry its name too (node_prefix).
PREFIX = "django_snowflake_id_"
COUNTER = f"{PREFIX}counter"
#: Odd while a catch-up moves the high digits of ``base`` (``base_1``...), which every
#: session caches while it stays even and unchanged.
VERSION = f"{PREFIX}version"
#: The session's cached answers (user variables), for the database named in the first: a
#: session may call the functions of several databases.
DATABASE_VARIABLE = "@django_snowflake_id_database"
SEEN_VARIABLE = "@django_snowflake_id_incarnation"
MARK_VARIABLE = "@django_snowflake_id_mark"
SETVAL_VARIABLE = "@django_snowflake_id_setval"
HIGH_VARIABLE = "@django_snowflake_id_high"
VERSION_VARIABLE = "@django_snowflake_id_version"
#: The catch-up lock: a name per database (GET_LOCK names are the server's).
LOCK_SQL = "CONCAT('django_snowflake_id:', MD5(DATABASE()))"
#: A call whose draw is at most this far behind the clock returns it when another session
#: holds the catch-up lock; one further behind waits for that session up to
#: :data:`CATCH_UP_WAIT_S` (a catch-up takes a few draws), then draws again: keys stay within
#: 50 ms of the clock after an idle pause. A lock that outlives its catch-up (a call killed
#: while it held it) costs each call behind the clock that wait, and its key the lag.
FRESH_MS = 25
CATCH_UP_WAIT_S = 0.1

#: The column default's sequence: layout units, ``time << sequence_bits | sequence``.
KEY_SEQUENCE = f"{PREFIX}key"
#: The incarnation the key sequence last skipped for (one row): read by the heartbeats, never
#: by an INSERT, so an InnoDB table costs the keys nothing.
CLOCK_TABLE = f"{PREFIX}clock"


@dataclasses.dataclass(frozen=True)
class Digits:
    """A number that only grows, kept in the ``NOCACHE`` sequences ``<prefix>0``,
    ``<prefix>1``, ...: the ``i``-th moves by ``step * 2**(radix_bits * i)``, and the number is
    the sum of their ``next_not_cached_value``. Every sequence a function may touch is locked
    for each statement that calls it, so each number has as few digits as its draws allow."""

    prefix: str
    step: int
    radix_bits: int
    count: int

    def create_sql(self) -> list[str]:
        return [
            f"CREATE SEQUENCE IF NOT EXISTS {self.prefix}{i} START WITH 0 MINVALUE 0 "
            f"INCREMENT BY {self.step << (self.radix_bits * i)} NOCACHE"
            for i in range(self.count)
        ]

    def sum_sql(self, *, first: int = 0) -> str:
        """The number (or its digits from ``first`` on) as it is now, in one statement."""
        if first >= self.count:
            return "0"
        total = " + ".join(f"s{i}.next_not_cached_value" for i in range(first, self.count))
        tables = ", ".join(f"{self.prefix}{i} s{i}" for i in range(first, self.count))
        return f"(SELECT {total} FROM {tables})"

    def raise_sql(self, steps: str, *, first: int = 0, last: int | None = None) -> str:
        """Statements drawing digits ``first..last`` highest first, until the number moved by
        ``steps`` steps (a variable, left with what those digits cannot take)."""
        top = self.count if last is None else last + 1
        return " ".join(
            f"WHILE {steps} >= {1 << (self.radix_bits * i)} DO "
            f"SET x = NEXT VALUE FOR {self.prefix}{i}; "
            f"SET {steps} = {steps} - {1 << (self.radix_bits * i)}; END WHILE;"
            for i in reversed(range(first, top))
        )

    def setval_sql(self, target: str) -> list[str]:
        """Top-level statements raising the number to ``target`` (a SQL expression) if it is
        below, through ``SETVAL`` of the first digit. The value goes through a user variable:
        ``EXECUTE IMMEDIATE`` takes no subquery."""
        first = f"(SELECT increment FROM {self.prefix}0)"
        return [
            f"SET {SETVAL_VARIABLE} = IF(({target}) > {self.sum_sql()}, "
            f"GREATEST(0, ({target}) - {self.sum_sql(first=1)} - {first}), NULL)",
            "EXECUTE IMMEDIATE COALESCE("
            f"CONCAT('DO SETVAL({self.prefix}0, ', {SETVAL_VARIABLE}, ')'), 'DO 0')",
        ]


def node_prefix(node: str) -> str:
    """The prefix of the sequences of Galera node ``node``'s clock: its name when that is a
    short lowercase word, else a digest of it (a name is any string; a sequence is a table,
    whose name may be case-sensitive)."""
    key = (
        node
        if re.fullmatch(r"[a-z0-9]{1,16}", node)
        else "n" + hashlib.md5(node.encode()).hexdigest()[:12]
    )
    return f"{PREFIX}{key}_"


def base_digits(layout: BitLayout, prefix: str = PREFIX) -> Digits:
    """``base``, in units of the layout's sequence: a digit per 64 time units, so catching up
    after half a second of quiet is 60 draws or fewer."""
    return Digits(f"{prefix}base_", 1 << layout.sequence_bits, 6, -(-layout.time_bits // 6))


def mark_digits(layout: BitLayout, prefix: str = PREFIX) -> Digits:
    """``mark`` (the last catch-up or skip point), in time units. It is raised every half lead
    (rounding down, so it never passes the clock): its first digit is the largest power of two
    within half a lead, and a digit per 2**11 of those."""
    half = max(1, max(1, 1000 // layout.time_unit_ms) // 2)
    step = 1 << (half.bit_length() - 1)
    bits = max(1, layout.time_bits - (step.bit_length() - 1))
    return Digits(f"{prefix}mark_", step, 11, -(-bits // 11))


def seen_digits(prefix: str = PREFIX) -> Digits:
    """The incarnation the clock last skipped for: the sum is CRC32(incarnation) modulo 2**32.
    Only sequences: an InnoDB row read by a function called from an INSERT is read with a lock
    held to commit (X when the function may write it), which made every session's first key
    wait for the longest statement. A new record adds less than 2**32."""
    return Digits(f"{prefix}seen_", 1, 11, 3)


SEEN = seen_digits()


def now_units_sql(layout: BitLayout) -> str:
    """The wall clock in layout units: ``SYSDATE()``, not fixed at the statement's start."""
    return f"FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 - {layout.epoch_ms}) / {layout.time_unit_ms})"


def _raise_base_sql(base: Digits, version: str, steps: str) -> str:
    """Statements moving ``base`` up by ``steps`` (a variable): the high digits, if any, with
    ``version`` odd (a catch-up in progress), then ``base_0``."""
    return (
        f"IF {steps} >= {1 << base.radix_bits} THEN "
        f"SET x = NEXT VALUE FOR {version}; "
        f"IF x % 2 = 1 THEN SET x = NEXT VALUE FOR {version}; END IF; "
        f"{base.raise_sql(steps, first=1)} "
        f"SET x = NEXT VALUE FOR {version}; "
        f"IF x % 2 = 0 THEN SET x = NEXT VALUE FOR {version}; END IF; "
        f"END IF; {base.raise_sql(steps, last=0)}"
    )


@dataclasses.dataclass(frozen=True)
class _Clock:
    """What one function's clock is made of: the server's, or a Galera node's own."""

    layout: BitLayout
    node: str | None

    @property
    def prefix(self) -> str:
        return PREFIX if self.node is None else node_prefix(self.node)

    @property
    def counter(self) -> str:
        return f"{self.prefix}counter"

    @property
    def version(self) -> str:
        return f"{self.prefix}version"

    @property
    def base(self) -> Digits:
        return base_digits(self.layout, self.prefix)

    @property
    def mark(self) -> Digits:
        return mark_digits(self.layout, self.prefix)

    @property
    def seen(self) -> Digits:
        return seen_digits(self.prefix)

    @property
    def incarnation(self) -> str:
        return MYSQL_INCARNATION_SQL if self.node is None else GALERA_INCARNATION_SQL

    @property
    def session(self) -> str:
        """What every call compares with the session's cached answer: the incarnation itself
        on a server; on a Galera node its name (a session ends with the node's run)."""
        return MYSQL_INCARNATION_SQL if self.node is None else "@@wsrep_node_name"


@dataclasses.dataclass(frozen=True)
class KeyClock:
    """What the column-default path draws and moves: the server's key sequence and the table
    of the incarnation it last skipped for, or a Galera node's own (``node``), which only that
    node draws and moves (one sequence drawn or set on two nodes at once repeats values)."""

    node: str | None = None

    @property
    def sequence(self) -> str:
        return KEY_SEQUENCE if self.node is None else f"{node_prefix(self.node)}key"

    @property
    def table(self) -> str:
        return CLOCK_TABLE if self.node is None else f"{node_prefix(self.node)}clock"

    @property
    def incarnation(self) -> str:
        return MYSQL_INCARNATION_SQL if self.node is None else GALERA_INCARNATION_SQL

    def create_sql(self) -> list[str]:
        return [
            # Galera refuses a cached sequence; on one server the cache spares a write per key.
            f"CREATE SEQUENCE IF NOT EXISTS {self.sequence} START WITH 0 MINVALUE 0"
            + ("" if self.node is None else " NOCACHE"),
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(id TINYINT NOT NULL PRIMARY KEY, incarnation VARCHAR(255) NOT NULL) ENGINE=InnoDB",
        ]


def mysql_function_sql(
    layout: BitLayout,
    slot: tuple[int, int] | None,
    *,
    lead_units: int,
    hold_units: int,
    comment: str = "",
    refusal: str = "",
    node: str | None = None,
    copied: str = "",
) -> list[str]:
    """The statements creating (or replacing) ``django_snowflake_id()`` and its sequences.

    ``slot`` is the database's ``(worker_id, datacenter_id)``; with ``None`` the function
    refuses every call (with ``refusal``, at most 128 characters, when given).
    ``lead_units`` bounds how far past ``max(now, P)`` a returned key may be; ``hold_units``
    is added to the skip at a new incarnation (the lease, in units). ``comment`` is the
    function's comment (by default its layout). ``node`` is the ``wsrep_node_name`` of the
    Galera node the statements are for, run on a connection to it: its own clock, its
    function created on it alone, refusing on any other node (with ``copied``, when given).
    """
    clock = _Clock(layout, node)
    sb = layout.sequence_bits
    base, mark, seen = clock.base, clock.mark, clock.seen
    now_units = now_units_sql(layout)
    counter = f"(SELECT next_not_cached_value FROM {clock.counter})"
    old_base = f"COALESCE((SELECT base FROM {OLD_BASE} WHERE id = 1), 0)"
    function = _function_sql(
        clock,
        slot,
        lead_units=lead_units,
        hold_units=hold_units,
        comment=comment or f"Layout {layout.fingerprint}",
        refusal=refusal,
        copied=copied
        or f"this function is Galera node {node}'s (a state transfer copied it): "
        "run manage.py migrate through this node",
    )
    # Above every key of the column-default path too (a switch back from it), a lead ahead:
    # its columns draw the key sequence until they get their trigger.
    keys = KeyClock(node)
    key = f"(SELECT next_not_cached_value FROM {keys.sequence})"
    return [
        *_trigger_clock_sql(clock),
        keys.create_sql()[0],
        # The server the function is first installed on is the clock's own.
        *seen.setval_sql(f"IF({seen.sum_sql()} = 0, CRC32({clock.incarnation}), 0)"),
        # So that the carry-over reads a table whether or not an earlier version left one.
        f"CREATE TABLE IF NOT EXISTS {OLD_BASE} "
        "(id TINYINT NOT NULL PRIMARY KEY, base BIGINT NOT NULL) ENGINE=InnoDB",
        # The clock starts at the wall clock and above every key of an earlier version; while
        # that one still runs (until the function is replaced) it may catch its base up to
        # the wall clock, so the new one starts a lead ahead.
        *base.setval_sql(
            f"GREATEST({old_base}, ({now_units} + IF({old_base} > 0, {lead_units}, 0)) * {1 << sb}"
            f" - {counter}, {key} + IF({key} > 0, {lead_units * (1 << sb)}, 0) - {counter})",
        ),
        *mark.setval_sql(
            f"GREATEST({now_units}, ({old_base} + {counter}) DIV {1 << sb}, {key} DIV {1 << sb})"
        ),
        # A Galera node's function names its own sequences and slot: not replicated.
        *(
            [function]
            if node is None
            else ["SET SESSION wsrep_on = OFF", function, "SET SESSION wsrep_on = ON"]
        ),
        f"DROP TABLE IF EXISTS {OLD_BASE}",
        # The heartbeats move the key sequence while this table says it is in use.
        f"DROP TABLE IF EXISTS {keys.table}",
    ]


def _trigger_clock_sql(clock: _Clock) -> list[str]:
    """The sequences of the function's clock (kept on the column-default path too)."""
    return [
        # Galera refuses a cached sequence; on one server the cache spares a write per key.
        f"CREATE SEQUENCE IF NOT EXISTS {clock.counter} START WITH 0 MINVALUE 0"
        + ("" if clock.node is None else " NOCACHE"),
        *clock.base.create_sql(),
        *clock.mark.create_sql(),
        *clock.seen.create_sql(),
        f"CREATE SEQUENCE IF NOT EXISTS {clock.version} START WITH 0 MINVALUE 0 NOCACHE",
    ]


def refusal_sql(comment: str, refusal: str) -> str:
    """``django_snowflake_id()`` refusing every call with ``refusal`` (at most 128
    characters)."""
    text = refusal.replace("'", "''")[:128]
    return _header(comment) + (
        f"BEGIN\n    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{text}';\n    RETURN NULL;\nEND"
    )


def _header(comment: str) -> str:
    return (
        f"CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS BIGINT\n"
        f"NOT DETERMINISTIC MODIFIES SQL DATA\nCOMMENT '{comment}'\n"
    )


def _guard_sql(node: str | None, copied: str) -> str:
    """A Galera node's function refuses on any other node (an SST copied it there): it would
    issue under its node's slot from that node's clock, as its node does."""
    if node is None:
        return ""
    text = copied.replace("'", "''")[:128]
    name = node.replace("'", "''")
    return (
        f"\n    IF NOT @@wsrep_node_name <=> '{name}' THEN\n"
        f"        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{text}';\n    END IF;"
    )


def _function_sql(
    clock: _Clock,
    slot: tuple[int, int] | None,
    *,
    lead_units: int,
    hold_units: int,
    comment: str,
    refusal: str,
    copied: str,
) -> str:
    layout = clock.layout
    header = _header(comment)
    if slot is None and refusal:
        return refusal_sql(comment, refusal)
    if slot is None:
        return header + (
            "BEGIN\n"
            "    DECLARE message VARCHAR(512) DEFAULT CONCAT('database ', DATABASE(),\n"
            "        ' has no Snowflake worker slot of its own: run python manage.py migrate',\n"
            "        ' --database=<its alias> after migrating the coordination database');\n"
            "    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = message;\n"
            "    RETURN NULL;\n"
            "END"
        )
    worker, datacenter = slot
    sb = layout.sequence_bits
    unit = 1 << sb
    digits, marks, seens = clock.base, clock.mark, clock.seen
    counter, version, incarnation = clock.counter, clock.version, clock.incarnation
    fixed = layout.compose(0, worker_id=worker, datacenter_id=datacenter)
    base, mark, high = digits.sum_sql(), marks.sum_sql(), digits.sum_sql(first=1)
    seen = seens.sum_sql()
    now_units = now_units_sql(layout)
    half = lead_units // 2
    fresh = max(1, FRESH_MS // layout.time_unit_ms)
    lock = "lock_name"
    wait = CATCH_UP_WAIT_S
    # A call interrupted while it held the lock (KILL, max_statement_time: no handler runs)
    # leaves it to its session; no call of this session holds it now.
    stale = f"WHILE IS_USED_LOCK({lock}) <=> CONNECTION_ID() DO DO RELEASE_LOCK({lock}); END WHILE;"
    # Before a catch-up, the same under the lock named after this session (``stand_in``),
    # which a session catching up in its place holds meanwhile; while another holds that, the
    # call leaves with its value rather than let go of a lock that one relies on.
    stand_in = f"CONCAT({lock}, ':', CONNECTION_ID())"
    stale_in_place = f"""IF IS_USED_LOCK({lock}) <=> CONNECTION_ID() THEN
                IF GET_LOCK({stand_in}, {wait}) IS NOT TRUE THEN
                    LEAVE draw;
                END IF;
                {stale}
                DO RELEASE_LOCK({stand_in});
            END IF;"""
    return (
        header
        + f"""BEGIN
    -- Layout {layout.fingerprint}, worker {worker}, datacenter {datacenter}. A key is
    -- m = base + counter in layout units: time m DIV {unit}, sequence m & {layout.max_sequence}.
    DECLARE b1 BIGINT; DECLARE v1 BIGINT; DECLARE n BIGINT; DECLARE m BIGINT;
    DECLARE now_u BIGINT;{_guard_sql(clock.node, copied)}
    IF NOT ({DATABASE_VARIABLE} <=> DATABASE() AND {SEEN_VARIABLE} <=> {clock.session})
    THEN
        SET {DATABASE_VARIABLE} = DATABASE(), {SEEN_VARIABLE} = NULL, {MARK_VARIABLE} = NULL,
            {HIGH_VARIABLE} = NULL, {VERSION_VARIABLE} = NULL;
        BEGIN
            DECLARE t BIGINT; DECLARE k BIGINT; DECLARE x BIGINT; DECLARE p BIGINT;
            DECLARE {lock} VARCHAR(64) DEFAULT {LOCK_SQL};
            DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN DO RELEASE_LOCK({lock}); RESIGNAL; END;
            SET t = {seen};
            IF t % {1 << 32} <> CRC32({incarnation}) THEN
                -- A new server: one session skips, the others wait for it, then see it.
                {stale}
                DO GET_LOCK({lock}, 10);
                SET t = {seen};
                IF t % {1 << 32} <> CRC32({incarnation}) THEN
                    SET n = NEXT VALUE FOR {counter};
                    SET b1 = {base};
                    SET p = {mark};
                    SET m = GREATEST({now_units}, (b1 + n) DIV {unit}, p)
                        + {hold_units} + {2 * lead_units};
                    SET k = (m - p) DIV {marks.step};
                    {marks.raise_sql("k")}
                    SET k = m - (b1 + n) DIV {unit};
                    {_raise_base_sql(digits, version, "k")}
                    SET {MARK_VARIABLE} = m;
                    SET k = ({1 << 32} + CAST(CRC32({incarnation}) AS SIGNED) - t % {1 << 32})
                        % {1 << 32};
                    {seens.raise_sql("k")}
                END IF;
                DO RELEASE_LOCK({lock});
            END IF;
        END;
        SET {SEEN_VARIABLE} = {clock.session};
    END IF;
    draw: LOOP
        -- A table's row is read before the select list is evaluated: b1, v1, then the draw.
        SELECT s0.next_not_cached_value, v.next_not_cached_value, NEXT VALUE FOR {counter}
            INTO b1, v1, n FROM {digits.prefix}0 s0, {version} v;
        -- base_0 and version unchanged across the draw, and version as when the high digits
        -- were cached: base was b1 + those at the draw.
        SELECT IF(s0.next_not_cached_value = b1 AND v.next_not_cached_value = v1
                AND v1 = {VERSION_VARIABLE}, b1 + {HIGH_VARIABLE} + n, NULL),
            {now_units} INTO m, now_u FROM {digits.prefix}0 s0, {version} v;
        IF m DIV {unit} >= now_u THEN
            LEAVE draw;
        END IF;
        BEGIN
            DECLARE b2 BIGINT; DECLARE k BIGINT; DECLARE x BIGINT; DECLARE p BIGINT;
            DECLARE holder BIGINT; DECLARE {lock} VARCHAR(64);
            DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN
                IF {lock} IS NOT NULL THEN DO RELEASE_LOCK({lock}); END IF;
                RESIGNAL;
            END;
            IF m IS NULL THEN
                IF v1 <=> {VERSION_VARIABLE} THEN
                    ITERATE draw;  -- base moved across the draw
                END IF;
                SET k = {high};
                IF v1 % 2 = 0 AND v1 = (SELECT next_not_cached_value FROM {version}) THEN
                    -- The high digits did not move while they were read: cache them.
                    SET {HIGH_VARIABLE} = k;
                    SET {VERSION_VARIABLE} = v1;
                    ITERATE draw;
                END IF;
                -- The high digits are moving: read all of base around a draw.
                SET b1 = {base};
                SET n = NEXT VALUE FOR {counter};
                SET b2 = {base};
                IF b1 <> b2 THEN
                    ITERATE draw;
                END IF;
                SET m = b1 + n;
                IF m DIV {unit} >= now_u THEN
                    LEAVE draw;
                END IF;
            END IF;
            -- m is unique but behind the clock: catch base up, unless another session does.
            -- A call close to the clock leaves with m; one further behind (after an idle
            -- pause) waits a little for the session catching up, then draws again.
            SET {lock} = {LOCK_SQL};
            {stale_in_place}
            IF GET_LOCK({lock}, 0) IS NOT TRUE THEN
                -- Nested, not AND/OR: a GET_LOCK evaluated twice would hold the lock twice.
                IF now_u - m DIV {unit} <= {fresh} THEN
                    LEAVE draw;
                END IF;
                SET holder = IS_USED_LOCK({lock});
                IF EXISTS (SELECT 1 FROM information_schema.PROCESSLIST
                        WHERE ID = holder AND COMMAND = 'Sleep') THEN
                    -- The holder runs no statement: a call of it was killed while it held
                    -- the lock. Catch up in its place, under the lock named after it, while
                    -- it still holds the first (it lets go only under the second).
                    SET {lock} = CONCAT({lock}, ':', holder);
                    IF GET_LOCK({lock}, {wait}) IS NOT TRUE THEN
                        LEAVE draw;
                    END IF;
                    IF NOT IS_USED_LOCK({LOCK_SQL}) <=> holder THEN
                        DO RELEASE_LOCK({lock});
                        ITERATE draw;  -- it let go meanwhile
                    END IF;
                ELSEIF GET_LOCK({lock}, {wait}) IS NOT TRUE THEN
                    LEAVE draw;
                END IF;
            END IF;
            SELECT s0.next_not_cached_value, v.next_not_cached_value INTO b2, k
                FROM {digits.prefix}0 s0, {version} v;
            SET b2 = IF(k = {VERSION_VARIABLE}, b2 + {HIGH_VARIABLE}, {base});
            IF b2 = m - n THEN
                -- Nobody moved base since m was drawn: move it by what m is behind.
                SET k = now_u - m DIV {unit};
                {_raise_base_sql(digits, version, "k")}
            END IF;
            IF {MARK_VARIABLE} IS NULL OR now_u > {MARK_VARIABLE} + {half} THEN
                SET p = {mark};
                IF now_u > p + {half} THEN
                    SET k = (now_u - p) DIV {marks.step};
                    SET p = p + k * {marks.step};
                    {marks.raise_sql("k")}
                END IF;
                SET {MARK_VARIABLE} = p;
            END IF;
            DO RELEASE_LOCK({lock});
        END;
    END LOOP draw;
    IF m DIV {unit} > now_u + {lead_units} THEN
        -- Ahead of the clock by more than the lead: wait, unless a skip or a catch-up made
        -- before the clock stepped back allows it.
        BEGIN
            DECLARE p BIGINT DEFAULT {mark};
            WHILE m DIV {unit} > GREATEST(now_u, p) + {lead_units} DO
                DO SLEEP((m DIV {unit} - {lead_units} - GREATEST(now_u, p))
                    * {layout.time_unit_ms} / 1000);
                SET now_u = {now_units};
            END WHILE;
        END;
    END IF;
    RETURN ((m DIV {unit}) << {layout.time_shift}) | {fixed} | (m & {layout.max_sequence});
END"""
    )


def trigger_name(table: str) -> str:
    """The MariaDB trigger of ``table``: at most 64 characters, unique per table."""
    name = f"{table}_snowflake_id"
    if len(name) > 64:
        name = f"{table[:40]}_{hashlib.sha1(table.encode()).hexdigest()[:10]}_snowflake_id"
    return name


def create_trigger_sql(quote_name: Callable[[str], str], table: str, column: str) -> str:
    """The trigger giving ``table.column`` a Snowflake when an INSERT leaves it out.

    An omitted key arrives as NULL or 0; as with ``AUTO_INCREMENT``, both mean "generate".
    """
    q = quote_name
    col = f"NEW.{q(column)}"
    return (
        f"CREATE TRIGGER {q(trigger_name(table))} BEFORE INSERT ON {q(table)} FOR EACH ROW "
        f"BEGIN IF {col} IS NULL OR {col} = 0 THEN SET {col} = {FUNCTION}(); END IF; END"
    )


def drop_trigger_sql(quote_name: Callable[[str], str], table: str) -> str:
    return f"DROP TRIGGER IF EXISTS {quote_name(trigger_name(table))}"
