"""MariaDB/MySQL's keys from the database: a column default over one sequence, or the strict
trigger and function (``SNOWFLAKE["MARIADB_KEYS"]``).

**The column default** (``"default"``, docs/fields.rst): the key of an INSERT that leaves it out
is the column's ``DEFAULT``, :func:`key_expression`, over one sequence per database
(:data:`KEY_SEQUENCE`) whose value counts layout units (time, then sequence):
``(NEXT VALUE FOR s) DIV 4096 * 4194304 + <slot bits> + (PREVIOUS VALUE FOR s) MOD 4096``
with the ``twitter`` layout. Each ``NEXT VALUE FOR`` draws (written twice it would draw
twice); ``PREVIOUS VALUE FOR`` is the session's last draw, the one just made, left to right,
row by row in a multi-row INSERT. No trigger: an INSERT that gives its key (every one Django
makes) pays nothing. The sequence follows the wall clock only because something moves it
forward: each process's heartbeat, once a second (:func:`move_clock_sql`), and ``migrate``.
``SETVAL`` only moves a sequence forward, so keys between two moves count up from the last one:
they never repeat nor go back, and lag the clock by the time since the last move. The
incarnation the sequence last skipped for is a row of :data:`CLOCK_TABLE` (read by the
heartbeat, never by an INSERT): the first heartbeat after a failover moves the sequence past
anything the old primary may have issued (:func:`failover_sql`). ``django_snowflake_id()``
then draws the same sequence.

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
  the lock returns its value, unique and slightly behind, rather than queue. A call
  interrupted while it holds the lock (``KILL``, ``max_statement_time``: no handler runs)
  leaves it to its session, which releases it at its next catch-up; until then, or until
  that connection closes, the other sessions' keys stay unique but fall behind the clock.
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

**A Galera cluster** draws, on each node, sequences only that node draws, under the node's own
slot. On the column-default path the ``DEFAULT`` and the one function choose them by
``@@wsrep_node_name`` (:func:`galera_key_expression`), each node's sequence moved by its own
heartbeats (:class:`KeyClock`). On the trigger path, below, each node
(``node``) gets a clock of its own: the same function over sequences named after it (``django_snowflake_id_<node>_counter``...), under a slot of its own. Galera neither
certifies nor serialises a sequence's draws across nodes (one sequence drawn on two nodes at
once repeats values) and ``GET_LOCK`` is a node's own, but a sequence only one node draws is
safe: its draws replicate as row images to the others, so a node that rejoins by a state
transfer gets its clock back. The sequences are created cluster-wide (replicated DDL); the
function is created on that node alone (``wsrep_on`` off for the statement), since each node's
names its own sequences and slot. A state transfer (SST) copies the donor's whole datadir,
its function included: a function refuses on any node but its own, and the node's incarnation
is its name and ``wsrep_gcomm_uuid`` (new at every start), so after a crash and rejoin the
node skips its clock past the keys it issued whose draws were not replicated, as a failover.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable
from typing import Any

from ..layout import BitLayout
from .base import FUNCTION, comment, hold_units, lead_units, refusal

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
#: ``SNOWFLAKE["MARIADB_KEYS"]``: the column default over one sequence, or the strict path.
KEYS_DEFAULT = "default"
KEYS_TRIGGER = "trigger"
KEYS = (KEYS_DEFAULT, KEYS_TRIGGER)
#: The column default's sequence: layout units, ``time << sequence_bits | sequence``.
KEY_SEQUENCE = f"{PREFIX}key"
#: What a column default draws while the database has no slot of its own: a sequence spent at
#: its install, so that an INSERT leaving the key out fails with its name, which says what to do.
NO_SLOT_SEQUENCE = f"{PREFIX}no_slot_run_migrate"
#: The incarnation the key sequence last skipped for (one row): read by the heartbeats, never
#: by an INSERT, so an InnoDB table costs the keys nothing.
CLOCK_TABLE = f"{PREFIX}clock"
#: What the function's comment says on the column-default path.
KEYS_COMMENT = f"keys={KEYS_DEFAULT}"


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
    lock = "lock_name"
    # A call interrupted while it held the lock (KILL, max_statement_time: no handler runs)
    # leaves it to its session; no call of this session holds it now.
    stale = f"WHILE IS_USED_LOCK({lock}) <=> CONNECTION_ID() DO DO RELEASE_LOCK({lock}); END WHILE;"
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
            DECLARE {lock} VARCHAR(64);
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
            SET {lock} = {LOCK_SQL};
            {stale}
            IF GET_LOCK({lock}, 0) IS NOT TRUE THEN
                LEAVE draw;
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


def install_sql(
    layout: BitLayout, slot: tuple[int, int] | None, *, alias: str, node: str | None = None
) -> list[str]:
    """The statements that create (or replace) the function; with ``node``, Galera node
    ``node``'s own, run on it. Off Galera, on the path ``SNOWFLAKE["MARIADB_KEYS"]`` names:
    the column default's sequence (:func:`key_sql`), or the strict function."""
    if node is None and keys() == KEYS_DEFAULT:
        return key_sql(
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


def keys() -> str:
    """``SNOWFLAKE["MARIADB_KEYS"]``: which path a MariaDB database takes."""
    from ..conf import get_settings

    return str(get_settings()["MARIADB_KEYS"])


def key_expression(
    layout: BitLayout, slot: tuple[int, int] | None, sequence: str = KEY_SEQUENCE
) -> str:
    """The ``DEFAULT`` of a keyed column on the column-default path: a Snowflake of ``slot``
    from one draw of ``sequence`` (``PREVIOUS VALUE FOR`` is that draw, evaluated after it,
    left to right). Without a slot, a draw of :data:`NO_SLOT_SEQUENCE`, which fails."""
    if slot is None:
        return f"NEXT VALUE FOR {NO_SLOT_SEQUENCE}"
    unit = 1 << layout.sequence_bits
    fixed = layout.compose(0, worker_id=slot[0], datacenter_id=slot[1])
    return (
        f"(NEXT VALUE FOR {sequence}) DIV {unit} * {1 << layout.time_shift} + {fixed} + "
        f"(PREVIOUS VALUE FOR {sequence}) MOD {unit}"
    )


def galera_key_expression(layout: BitLayout, slots: dict[str, tuple[int, int] | None]) -> str:
    """:func:`key_expression` on a Galera cluster: each node (``slots``: the nodes by
    ``wsrep_node_name``) draws its own sequence under its own slot. ``CASE`` evaluates only
    the branch it takes, so a node draws no other node's sequence; a node the expression does
    not name (one that joined after the last ``migrate``) draws :data:`NO_SLOT_SEQUENCE`,
    which fails, naming it."""
    branches = " ".join(
        f"WHEN '{name.replace(chr(39), chr(39) * 2)}' THEN "
        f"{key_expression(layout, slot, KeyClock(name).sequence)}"
        for name, slot in sorted(slots.items())
    )
    return f"CASE @@wsrep_node_name {branches} ELSE NEXT VALUE FOR {NO_SLOT_SEQUENCE} END"


def _key_function_sql(expression: str, comment: str) -> str:
    """``django_snowflake_id()`` on the column-default path: the columns' key ``expression``,
    from the same sequence (a caller that draws it gets a key no INSERT gets)."""
    return _header(comment) + f"BEGIN\n    RETURN {expression};\nEND"


def _no_slot_sql() -> list[str]:
    return [
        # Spent at once: a draw fails, naming it.
        f"CREATE SEQUENCE IF NOT EXISTS {NO_SLOT_SEQUENCE} START WITH 0 MINVALUE 0 MAXVALUE 1 "
        "NOCACHE",
        f"DO SETVAL({NO_SLOT_SEQUENCE}, 1)",
    ]


def _start_key_sql(layout: BitLayout, node: str | None, lead_units: int) -> list[str]:
    """Raise the key sequence of the server (or of Galera node ``node``) to a lead above the
    wall clock and above every key the trigger path's function issued there (its clock
    ``base + counter``, kept, so that a switch back starts above this one)."""
    clock = _Clock(layout, node)
    unit = 1 << layout.sequence_bits
    trigger_m = f"({clock.base.sum_sql()} + (SELECT next_not_cached_value FROM {clock.counter}))"
    target = f"GREATEST({now_units_sql(layout)} * {unit}, {trigger_m}) + {lead_units * unit}"
    sequence = KeyClock(node).sequence
    return [
        *_trigger_clock_sql(clock),
        *KeyClock(node).create_sql(),
        f"SET {SETVAL_VARIABLE} = {target}",
        f"EXECUTE IMMEDIATE CONCAT('DO SETVAL({sequence}, ', {SETVAL_VARIABLE}, ')')",
    ]


def key_sql(
    layout: BitLayout,
    slot: tuple[int, int] | None,
    *,
    lead_units: int,
    comment: str,
    refusal: str,
) -> list[str]:
    """The statements installing the column-default path: its sequence, started a lead above
    the wall clock and above every key the trigger path's function issued (its clock
    ``base + counter``, kept, so that a switch back starts above this one), the incarnation it
    runs on, and ``django_snowflake_id()`` over it (refusing without a slot).

    The function is replaced right after the sequence is set: from then on the triggers that
    remain until the tables get their default call it, so both draw the one sequence."""
    return [
        *_no_slot_sql(),
        *_start_key_sql(layout, None, lead_units),
        # The server the path is installed on is the clock's own.
        f"INSERT IGNORE INTO {CLOCK_TABLE} (id, incarnation) VALUES (1, {MYSQL_INCARNATION_SQL})",
        _key_function_sql(key_expression(layout, slot), comment)
        if slot is not None
        else refusal_sql(comment, refusal),
    ]


#: What the function's comment says on a Galera cluster's column-default path: each node it
#: serves, by the key of its sequences' names, and its slot (``nodes=node1:1023/0,...``).
NODES = re.compile(r" nodes=(\S*)")


def galera_nodes(comment: str | None) -> dict[str, str] | None:
    """The nodes (by :func:`node_prefix`'s key) and slots ``"W/D"`` a Galera cluster's
    column-default function serves, from its ``comment``; ``None`` off that path."""
    found = NODES.search(comment or "")
    if found is None:
        return None
    return dict(entry.split(":", 1) for entry in found.group(1).split(",") if ":" in entry)


def node_key(node: str) -> str:
    """How ``node`` is named in the comment: the part of :func:`node_prefix` after ours."""
    return node_prefix(node)[len(PREFIX) : -1]


def galera_key_sql(
    layout: BitLayout,
    slots: dict[str, tuple[int, int] | None],
    *,
    here: str,
    moving: set[str],
    runs: dict[str, str],
    lead_units: int,
    comment: str,
) -> list[str]:
    """The column-default path of a Galera cluster, run through node ``here`` and replicated
    to every node: each node's key sequence (``NOCACHE``, as Galera needs) and clock table,
    and one ``django_snowflake_id()`` over :func:`galera_key_expression`.

    A sequence is set only where no node draws it meanwhile: those of ``moving`` (``here``,
    nodes the expression did not name before, every node when the cluster leaves the trigger
    path, whose function draws other sequences), raised as :func:`_start_key_sql` says.
    Another node's sequence is moved by that node's own heartbeats.

    Each node of ``moving`` whose run (its ``wsrep_gcomm_uuid``, from ``runs``) is known is
    recorded as seen: the sequence just started above all it issued, so its first heartbeat
    has nothing to skip (a skip runs the node's keys a minute ahead of the clock)."""
    listed = ",".join(
        f"{node_key(name)}:{'none' if slot is None else f'{slot[0]}/{slot[1]}'}"
        for name, slot in sorted(slots.items())
    )
    statements = _no_slot_sql()
    for name in sorted(slots):
        if name in moving:
            statements += _start_key_sql(layout, name, lead_units)
        else:
            statements += KeyClock(name).create_sql()
    for name in sorted(moving):
        if name == here:
            run = GALERA_INCARNATION_SQL
        elif name in runs:
            run = "'" + f"{name}@{runs[name]}".replace("'", "''") + "'"
        else:
            continue  # a node of an unknown run skips at its first heartbeat
        statements.append(
            f"INSERT IGNORE INTO {KeyClock(name).table} (id, incarnation) VALUES (1, {run})"
        )
    return [
        *statements,
        _key_function_sql(
            galera_key_expression(layout, slots), f"{comment} {KEYS_COMMENT} nodes={listed}"
        ),
    ]


def move_clock(
    cursor: Any, layout: BitLayout, *, lead_units: int, hold_units: int, node: str | None = None
) -> str:
    """Move the key sequence of ``cursor``'s database (of its Galera node ``node``: only the
    node that draws a sequence may set it) forward: to the wall clock (a ``SETVAL`` that a
    sequence already ahead ignores), or, the first time a new incarnation is seen (a failover,
    a restore, a node's new run), past anything the old one may have issued:
    ``max(now, replayed value) + hold + 2 * lead`` units, under a lock so that one session
    skips while the others wait for it. Returns ``"moved"``, ``"skipped"`` or ``""`` (the
    database is on the trigger path, no clock table, or read-only, a replica)."""
    clock = KeyClock(node)
    unit = 1 << layout.sequence_bits
    now = now_units_sql(layout)
    # A read-only server is a replica (an alias for reads): its sequence follows the
    # primary's, and a skip there would diverge from it.
    cursor.execute(
        "SELECT @@read_only, EXISTS (SELECT 1 FROM information_schema.TABLES "
        f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{clock.table}')"
    )
    read_only, on_default_path = cursor.fetchone()
    if read_only or not on_default_path:
        return ""
    cursor.execute(
        f"SELECT incarnation = {clock.incarnation}, {now} * {unit} - 1 "
        f"FROM {clock.table} WHERE id = 1"
    )
    row = cursor.fetchone()
    if row is not None and row[0]:
        cursor.execute(f"DO SETVAL({clock.sequence}, %s)", [int(row[1])])
        return "moved"
    cursor.execute(f"DO GET_LOCK({LOCK_SQL}, 10)")
    try:
        cursor.execute(f"SELECT incarnation = {clock.incarnation} FROM {clock.table} WHERE id = 1")
        row = cursor.fetchone()
        if row is None or not row[0]:
            cursor.execute(
                f"SELECT (GREATEST({now}, next_not_cached_value DIV {unit}) "
                f"+ {hold_units + 2 * lead_units}) * {unit} FROM {clock.sequence}"
            )
            cursor.execute(f"DO SETVAL({clock.sequence}, %s)", [int(cursor.fetchone()[0])])
            cursor.execute(
                f"REPLACE INTO {clock.table} (id, incarnation) VALUES (1, {clock.incarnation})"
            )
    finally:
        cursor.execute(f"DO RELEASE_LOCK({LOCK_SQL})")
    return "skipped"


def installed_keys(comment: str | None) -> str | None:
    """Which path the function with ``comment`` serves; ``None`` when there is none."""
    if comment is None:
        return None
    return KEYS_DEFAULT if KEYS_COMMENT in comment else KEYS_TRIGGER


#: The keyed columns of the connection's database, either path: (table, column) of a default
#: over our sequences, (table, trigger body) of our triggers.
KEYED_COLUMNS_SQL = (
    "SELECT table_name, column_name, 0 FROM information_schema.columns "
    "WHERE table_schema = DATABASE() AND (column_default LIKE %s OR column_default LIKE %s) "
    "UNION ALL SELECT event_object_table, action_statement, 1 FROM information_schema.triggers "
    "WHERE trigger_schema = DATABASE() AND action_statement LIKE %s"
)
KEYED_COLUMNS_PARAMS = [f"%{PREFIX}%key%", f"%{NO_SLOT_SEQUENCE}%", f"%{FUNCTION}()%"]


def keyed_columns(rows: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    """The (table, column) pairs of :data:`KEYED_COLUMNS_SQL`'s rows."""
    found = {}
    for table, text, is_trigger in rows:
        column = re.search(r"NEW\.`([^`]+)`", text) if is_trigger else None
        if is_trigger and column is None:
            continue
        found[table] = column.group(1) if column is not None else text
    return sorted(found.items())


def installed_comment_sql() -> tuple[str, list[str]]:
    """The query of the comment of the function of the connection's database."""
    return (
        "SELECT routine_comment FROM information_schema.routines "
        "WHERE routine_schema = DATABASE() AND routine_name = %s",
        [FUNCTION],
    )


# Type and extra of a column (parameters: table, column).
COLUMN_SQL = (
    "SELECT data_type, extra FROM information_schema.columns "
    "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = %s"
)


def plain_bigint(row: tuple[str, ...]) -> bool:
    """Whether the :data:`COLUMN_SQL` row is a bigint with no ``AUTO_INCREMENT`` of its own."""
    return row[0] == "bigint" and "auto_increment" not in row[1].lower()


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


def key_default_sql(
    quote_name: Callable[[str], str], table: str, column: str, default: str = "0"
) -> list[str]:
    """Give an existing column its default: ``default``, the key expression of the
    column-default path (and no trigger), or 0 and its trigger (the strict path)."""
    sql = "0" if default == "0" else f"({default})"
    return [
        f"ALTER TABLE {quote_name(table)} ALTER COLUMN {quote_name(column)} SET DEFAULT {sql}",
        drop_trigger_sql(quote_name, table),
        *([create_trigger_sql(quote_name, table, column)] if default == "0" else []),
    ]


def key_changed_sql(
    quote_name: Callable[[str], str],
    table: str,
    old: str | None,
    new: str | None,
    default: str = "0",
) -> list[str]:
    """The trigger's statements when a table's database-keyed column changes from ``old`` to
    ``new`` (``None``: none); on the column-default path (``default`` not 0), none but the
    removal of an earlier trigger."""
    if old == new:
        return []
    statements = [] if old is None else [drop_trigger_sql(quote_name, table)]
    if new is not None and default == "0":
        statements.append(create_trigger_sql(quote_name, table, new))
    return statements


def clock_sql(layout: BitLayout, node: str | None = None) -> str:
    """The query of how far (ms) the key sequence (of Galera node ``node``), the time of the
    next key a column default gives, is behind the server's now (negative: ahead); no row off
    the default path."""
    clock = KeyClock(node)
    unit = 1 << layout.sequence_bits
    return (
        f"SELECT ({now_units_sql(layout)} - next_not_cached_value DIV {unit}) * "
        f"{layout.time_unit_ms} FROM {clock.sequence} WHERE EXISTS (SELECT 1 FROM "
        "information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
        f"AND TABLE_NAME = '{clock.table}')"
    )
