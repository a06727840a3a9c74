"""MariaDB's column default, ``SNOWFLAKE["MARIADB_KEYS"] = "default"`` (the default).

**The column default** (``"default"``, docs/fields.rst): the key of an INSERT that leaves it out
is the column's ``DEFAULT``, :func:`key_expression`, over one sequence per database
(:data:`KEY_SEQUENCE`) whose value counts layout units (time, then sequence):
``(NEXT VALUE FOR s) DIV 4096 * 4194304 + <slot bits> + (PREVIOUS VALUE FOR s) MOD 4096``
with the ``twitter`` layout. Each ``NEXT VALUE FOR`` draws (written twice it would draw
twice); ``PREVIOUS VALUE FOR`` is the session's last draw, the one just made, left to right,
row by row in a multi-row INSERT. No trigger: an INSERT that gives its key (every one Django
makes) pays nothing. The sequence follows the wall clock only because something moves it
forward: each process's heartbeat, once a second (:func:`move_clock`), ``migrate``, and, while
no process runs, the server's own event :data:`TICK_EVENT` (:func:`tick_sql`) where the event
scheduler is on.
``SETVAL`` only moves a sequence forward, so keys between two moves count up from the last one:
they never repeat nor go back, and lag the clock by the time since the last move. The
incarnation the sequence last skipped for is a row of :data:`CLOCK_TABLE` (read by the
heartbeat, never by an INSERT): the first heartbeat after a failover moves the sequence past
anything the old primary may have issued (:func:`failover_sql`). ``django_snowflake_id()``
then draws the same sequence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from ...layout import BitLayout
from ..base import FUNCTION
from .trigger import (
    CLOCK_TABLE,
    GALERA_INCARNATION_SQL,
    KEY_SEQUENCE,
    LOCK_SQL,
    MYSQL_INCARNATION_SQL,
    PREFIX,
    SETVAL_VARIABLE,
    KeyClock,
    _Clock,
    _header,
    _trigger_clock_sql,
    create_trigger_sql,
    drop_trigger_sql,
    node_prefix,
    now_units_sql,
    refusal_sql,
)

#: ``SNOWFLAKE["MARIADB_KEYS"]``: the column default over one sequence, or the strict path.
KEYS_DEFAULT = "default"
KEYS_TRIGGER = "trigger"
KEYS = (KEYS_DEFAULT, KEYS_TRIGGER)
#: What a column default draws while the database has no slot of its own: a sequence spent at
#: its install, so that an INSERT leaving the key out fails with its name, which says what to do.
NO_SLOT_SEQUENCE = f"{PREFIX}no_slot_run_migrate"
#: What the function's comment says on the column-default path.
KEYS_COMMENT = f"keys={KEYS_DEFAULT}"


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


#: MariaDB's errors for a privilege the role lacks: on a table (1142), a column (1143), a
#: database (1044), a routine (1370).
DENIED = (1142, 1143, 1044, 1370)
#: MariaDB's error for a table that does not exist.
NO_SUCH_TABLE = 1146


def clock_probes(clock: KeyClock) -> list[tuple[str, str, str]]:
    """``(table, privilege, statement)``: each privilege the heartbeat's :func:`move_clock`
    uses, and a statement that needs it and changes nothing (MariaDB checks privileges before
    it evaluates a ``WHERE``)."""
    return [
        (clock.table, "SELECT", f"SELECT 1 FROM {clock.table} LIMIT 0"),
        (
            clock.table,
            "INSERT",
            f"INSERT INTO {clock.table} (id, incarnation) SELECT 1, '' FROM DUAL WHERE 1 = 0",
        ),
        (clock.table, "DELETE", f"DELETE FROM {clock.table} WHERE 1 = 0"),
        (clock.sequence, "SELECT", f"SELECT 1 FROM {clock.sequence} LIMIT 0"),
        (clock.sequence, "INSERT", f"SELECT SETVAL({clock.sequence}, 0) FROM DUAL WHERE 1 = 0"),
    ]


def missing_grants(cursor: Any, node: str | None = None) -> list[str]:
    """The ``GRANT`` statements the connected role needs for the heartbeat to move the key
    clock (:func:`move_clock`), for a DBA to paste; ``[]`` when it has every privilege, or
    off the column-default path (no clock table)."""
    clock = KeyClock(node)
    missing: dict[str, list[str]] = {}
    for table, privilege, statement in clock_probes(clock):
        try:
            cursor.execute(statement)
        except DatabaseError as exc:
            code = exc.args[0] if exc.args else None
            if code == NO_SUCH_TABLE:
                return []
            if code not in DENIED:
                raise
            missing.setdefault(table, []).append(privilege)
    if not missing:
        return []
    cursor.execute("SELECT DATABASE(), CURRENT_USER()")
    name, role = cursor.fetchone()
    user, _, host = role.rpartition("@")
    return [
        f"GRANT {', '.join(privileges)} ON `{name}`.`{table}` TO '{user}'@'{host}';"
        for table, privileges in missing.items()
    ]


def _move_target(layout: BitLayout) -> str:
    """The ``SETVAL`` of a move: the next key is the wall clock's first."""
    return f"{now_units_sql(layout)} * {1 << layout.sequence_bits} - 1"


def _skip_target(clock: KeyClock, layout: BitLayout, *, lead_units: int, hold_units: int) -> str:
    """The ``SETVAL`` of a skip, past anything an old incarnation may have issued."""
    unit = 1 << layout.sequence_bits
    return (
        f"SELECT (GREATEST({now_units_sql(layout)}, next_not_cached_value DIV {unit}) "
        f"+ {hold_units + 2 * lead_units}) * {unit} FROM {clock.sequence}"
    )


#: The server's event that moves the key clock as a heartbeat does, so that raw keys follow the
#: clock while no process of the project runs (MariaDB's event scheduler, when it is on).
TICK_EVENT = f"{PREFIX}tick"
#: How many moves a tick makes, evenly spread over its second: an event runs at most once a
#: second, and a key drawn just before the next move lags the clock by the time since the last.
MOVES_PER_TICK = 2
#: What the event's comment says (MariaDB keeps 64 characters of it).
TICK_COMMENT = "django_snowflake's key clock"


def tick_sql(
    layout: BitLayout, *, lead_units: int, hold_units: int, node: str | None = None
) -> list[str]:
    """The statements (re)creating :data:`TICK_EVENT`: every second, :data:`MOVES_PER_TICK`
    times, what :func:`move_clock` does (a move, or the skip of a new incarnation under the
    same lock), on the server's own clock; nothing on a read-only server. A lock its run
    holds is released when the run's thread ends, whatever stopped it.

    With ``node``, Galera node ``node``'s own event, run on it with replication off (MariaDB
    runs an event on one node only): it moves that node's clock, and nothing on a node a
    state transfer copied it to."""
    clock = KeyClock(node)
    mine = "" if node is None else " AND @@wsrep_node_name <=> " + _quoted(node)
    same = (
        f"EXISTS (SELECT 1 FROM {clock.table} WHERE id = 1 AND incarnation = {clock.incarnation})"
    )
    setval = f"EXECUTE IMMEDIATE CONCAT('DO SETVAL({clock.sequence}, ', {SETVAL_VARIABLE}, ')');"
    skip = _skip_target(clock, layout, lead_units=lead_units, hold_units=hold_units)
    body = f"""BEGIN
    DECLARE moves INT DEFAULT 0;
    WHILE moves < {MOVES_PER_TICK} AND NOT @@read_only{mine} DO
        IF moves > 0 THEN DO SLEEP({1 / MOVES_PER_TICK}); END IF;
        IF {same} THEN
            SET {SETVAL_VARIABLE} = {_move_target(layout)};
            {setval}
        ELSEIF GET_LOCK({LOCK_SQL}, 10) THEN
            IF NOT {same} THEN
                SET {SETVAL_VARIABLE} = ({skip});
                {setval}
                REPLACE INTO {clock.table} (id, incarnation) VALUES (1, {clock.incarnation});
            END IF;
            DO RELEASE_LOCK({LOCK_SQL});
        END IF;
        SET moves = moves + 1;
    END WHILE;
END"""
    return [
        f"DROP EVENT IF EXISTS {TICK_EVENT}",
        f"CREATE EVENT {TICK_EVENT} ON SCHEDULE EVERY 1 SECOND ON COMPLETION PRESERVE ENABLE "
        f"COMMENT {_quoted(tick_comment(node))} DO {body}",
    ]


def tick_comment(node: str | None) -> str:
    """What :data:`TICK_EVENT`'s comment says: a Galera node's names the node."""
    return (TICK_COMMENT if node is None else f"{TICK_COMMENT} node={node}")[:64]


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


#: Off the column-default path (the trigger's function follows the clock itself).
DROP_TICK_SQL = f"DROP EVENT IF EXISTS {TICK_EVENT}"


def idle_clock(cursor: Any, node: str | None = None) -> str | None:
    """Why the key clock (of Galera node ``node``) would stop while no process runs:
    ``"off"`` (the server's event scheduler), ``"missing"`` (no :data:`TICK_EVENT`: the role
    that ran ``migrate`` may not create events; on Galera, ``migrate`` did not reach the node,
    or a state transfer copied another node's), ``"disabled"`` (a replica's copy, as
    replication leaves it, on a promoted server), ``"hidden"`` (this role may not see events);
    ``None`` when the event runs."""
    cursor.execute(
        "SELECT @@event_scheduler, status, event_comment FROM (SELECT 1) one LEFT JOIN "
        "information_schema.EVENTS ON event_schema = DATABASE() AND event_name = %s",
        [TICK_EVENT],
    )
    scheduler, status, comment = cursor.fetchone()
    if str(scheduler).upper() != "ON":
        return "off"
    if status is not None and comment != tick_comment(node):
        return "missing"
    if status is None:
        # The catalog lists the events of schemas the role holds EVENT on.
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM information_schema.USER_PRIVILEGES "
            "WHERE privilege_type = 'EVENT') OR EXISTS (SELECT 1 FROM "
            "information_schema.SCHEMA_PRIVILEGES WHERE privilege_type = 'EVENT' "
            "AND DATABASE() LIKE table_schema)"
        )
        return "missing" if cursor.fetchone()[0] else "hidden"
    return None if status == "ENABLED" else "disabled"


def move_clock(
    cursor: Any, layout: BitLayout, *, lead_units: int, hold_units: int, node: str | None = None
) -> str:
    """Move the key sequence of ``cursor``'s database (of its Galera node ``node``: only the
    node that draws a sequence may set it) forward: to the wall clock (a ``SETVAL`` that a
    sequence already ahead ignores), or, the first time a new incarnation is seen (a failover,
    a restore, a node's new run), past anything the old one may have issued:
    ``max(now, replayed value) + hold + 2 * lead`` units, under a lock so that one session
    skips while the others wait for it. Returns ``"moved"``, ``"skipped"`` or ``""`` (the
    database is on the trigger path, no clock table, or read-only, a replica). A role that
    lacks a privilege it needs gets MariaDB's error (:func:`missing_grants` names them)."""
    clock = KeyClock(node)
    # A read-only server is a replica (an alias for reads): its sequence follows the
    # primary's, and a skip there would diverge from it.
    cursor.execute(
        "SELECT @@read_only, EXISTS (SELECT 1 FROM information_schema.TABLES "
        f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{clock.table}')"
    )
    read_only, visible = cursor.fetchone()
    if read_only:
        return ""
    if not visible:
        # The catalog hides a table the role has no privilege on: tell a table that is not
        # there (the trigger path) from one this role may not read, which raises (1142).
        try:
            cursor.execute(f"SELECT 1 FROM {clock.table} LIMIT 0")
        except DatabaseError as exc:
            if exc.args[:1] == (NO_SUCH_TABLE,):
                return ""
            raise
    cursor.execute(
        f"SELECT incarnation = {clock.incarnation}, {_move_target(layout)} "
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
                _skip_target(clock, layout, lead_units=lead_units, hold_units=hold_units)
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
