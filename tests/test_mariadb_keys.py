"""MariaDB's keys from a column default over one sequence (issue 26), on the real server.

Raw connections insert into a keyed table that leaves the key out: unique and increasing per
connection under 32 connections, no trigger on the table, a lag behind the clock of the time
since the sequence last moved, brought back within a second by a real process's heartbeat;
the switch to the trigger path and back with ``migrate``. Skipped unless
``SNOWFLAKE_TEST_DB=mariadb``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import override_settings

import django_snowflake
from django_snowflake.checks import check_database_functions
from django_snowflake.conf import get_layout
from django_snowflake.database_keys import move_database_clocks
from django_snowflake.database_slots import lease_database_slot
from django_snowflake.vendors import database
from django_snowflake.vendors.mysql.keys import (
    CLOCK_TABLE,
    KEY_SEQUENCE,
    MYSQL_INCARNATION_SQL,
    TICK_EVENT,
    installed_keys,
    move_clock,
)
from tests.ha_servers import Pair, keys_across_a_crash, start_process
from tests.testapp.models import Customer

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("SNOWFLAKE_TEST_DB") != "mariadb", reason="MariaDB's column default"
    ),
    pytest.mark.skipif(
        settings.SNOWFLAKE.get("MARIADB_KEYS") == "trigger", reason="the column-default path"
    ),
    pytest.mark.django_db(transaction=True),
]

TABLE = Customer._meta.db_table
CONNECTIONS = 32
ROWS = 60


@pytest.fixture
def heartbeats_alone() -> Iterator[None]:
    """The database's own event off (test_clock_event turns the server's scheduler on): what
    the heartbeats do alone, as on a server whose scheduler is off."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER EVENT {TICK_EVENT} DISABLE")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER EVENT {TICK_EVENT} ENABLE")


def driver() -> Any:
    """A bare driver connection to the test database, in autocommit: another service."""
    import MySQLdb

    conf = connection.settings_dict
    return MySQLdb.connect(
        host=conf["HOST"] or "127.0.0.1",
        port=int(conf["PORT"] or 3306),
        user=conf["USER"],
        password=conf["PASSWORD"],
        database=conf["NAME"],
        autocommit=True,
    )


def raw_insert(db: Any, name: str) -> None:
    with db.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{TABLE}` (name) VALUES (%s)", [name])


def key_of(name: str) -> int:
    return int(Customer.objects.get(name=name).pk)


def lag_ms(key: int, at: datetime) -> float:
    return (at - django_snowflake.decode(key).timestamp).total_seconds() * 1000


def test_a_keyed_table_has_no_trigger_and_defaults_to_the_sequence() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT column_default FROM information_schema.columns WHERE table_schema = "
            "DATABASE() AND table_name = %s AND column_name = 'id'",
            [TABLE],
        )
        assert KEY_SEQUENCE in cursor.fetchone()[0]
    assert installed_keys(database(connection).installed_comment()) == "default"


def test_32_connections_of_raw_inserts_share_no_key() -> None:
    dbs = [driver() for _ in range(CONNECTIONS)]
    gun = threading.Barrier(CONNECTIONS)

    def work(number: int) -> None:
        gun.wait()
        for row in range(ROWS):
            raw_insert(dbs[number], f"{number}-{row}")

    with ThreadPoolExecutor(CONNECTIONS) as pool:
        list(pool.map(work, range(CONNECTIONS)))
    for db in dbs:
        db.close()
    rows = dict(Customer.objects.values_list("name", "pk"))
    assert len(rows) == CONNECTIONS * ROWS
    assert len(set(rows.values())) == CONNECTIONS * ROWS  # 0 duplicates
    slot = lease_database_slot("default", get_layout())[0]  # type: ignore[index]
    for number in range(CONNECTIONS):
        keys = [rows[f"{number}-{row}"] for row in range(ROWS)]
        assert keys == sorted(keys)  # increasing per connection
        assert {django_snowflake.decode(key).worker_id for key in keys} == {slot}


def test_a_multi_row_insert_draws_a_key_per_row() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{TABLE}` (name) SELECT seq FROM seq_1_to_5000")
    keys = sorted(Customer.objects.values_list("pk", flat=True))
    assert len(set(keys)) == 5000
    # The sequence carried from the last sequence number of a time unit into the next.
    assert len({django_snowflake.decode(key).timestamp for key in keys}) >= 2


#: The process of the heartbeat test: claims a worker slot, then beats until stdin closes.
HEARTBEAT_PROCESS = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
import django_snowflake
from django_snowflake.checks import check_database_functions
django_snowflake.generate()
print("claimed", flush=True)
sys.stdin.read()
"""


def test_next_value_written_twice_draws_twice_and_previous_value_is_the_sessions_last() -> None:
    """Why the expression reads its draw back with PREVIOUS VALUE FOR: a second NEXT VALUE FOR
    would draw again (the two halves of a key from two draws); PREVIOUS VALUE FOR is the
    session's own last draw, whatever other sessions drew since."""
    other = driver()
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT NEXT VALUE FOR {KEY_SEQUENCE}, NEXT VALUE FOR {KEY_SEQUENCE}")
            first, second = cursor.fetchone()
            assert second == first + 1
            with other.cursor() as theirs:
                theirs.execute(f"SELECT NEXT VALUE FOR {KEY_SEQUENCE}")
            cursor.execute(f"SELECT PREVIOUS VALUE FOR {KEY_SEQUENCE}")
            assert cursor.fetchone()[0] == second
    finally:
        other.close()


@contextlib.contextmanager
def holding_a_lease() -> Iterator[subprocess.Popen[str]]:
    """A real process of the project holding a worker lease (its heartbeat moves the key
    sequence each second), from its first ID (its claim) to the block's end."""
    environment = {
        **os.environ,
        "SNOWFLAKE_TEST_DB_NAME": connection.settings_dict["NAME"],
        "SNOWFLAKE_TEST_SETTINGS": json.dumps(
            {**settings.SNOWFLAKE, "WORKER_ALLOCATOR": "database"}
        ),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", HEARTBEAT_PROCESS],
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "claimed"
    yield child
    child.communicate("", timeout=30)


def test_the_lag_is_the_time_since_the_last_move(heartbeats_alone: None) -> None:
    db = driver()
    try:
        time.sleep(1.1)  # migrate started the sequence a lead (a second) ahead of the clock
        move_database_clocks()  # what a heartbeat does: the sequence is at the clock
        moved = datetime.now(UTC)
        time.sleep(8)  # idle: nothing moves the sequence
        stop = time.monotonic() + 2
        count = 0
        while time.monotonic() < stop:
            raw_insert(db, f"burst-{count}")
            count += 1
        at = datetime.now(UTC)
        last = key_of(f"burst-{count - 1}")
        # Keys count up from the last move: the lag is the time since it, less what the
        # inserts counted up (a time unit per 4096 keys), never more.
        since_ms = (at - moved).total_seconds() * 1000
        counted_ms = count / (get_layout().max_sequence + 1) * get_layout().time_unit_ms
        assert since_ms - counted_ms - 300 <= lag_ms(last, at) <= since_ms + 50
        assert lag_ms(last, at) > 9000
    finally:
        db.close()


def test_a_process_heartbeat_brings_the_lag_back_within_a_second(heartbeats_alone: None) -> None:
    with contextlib.closing(driver()) as db, holding_a_lease():
        time.sleep(1.2)  # a beat at most a second after the claim
        raw_insert(db, "after-a-beat")
        at = datetime.now(UTC)
        assert lag_ms(key_of("after-a-beat"), at) < 1100
        time.sleep(3)
        raw_insert(db, "three-seconds-on")
        at = datetime.now(UTC)
        assert lag_ms(key_of("three-seconds-on"), at) < 1100


def test_a_process_brings_the_lag_back_as_it_claims(heartbeats_alone: None) -> None:
    """The first beat comes with the claim: a process starting after an idle pause (a deploy,
    a cron job, a worker woken by a queue) does not leave the idle time in the keys of raw
    INSERTs for its first second. Seen in the fresh project's scenario: a process that lived
    under a second never moved the sequence, and its raw INSERT's key was 2.4 s old."""
    move_database_clocks()
    time.sleep(3)  # idle: nothing moves the sequence
    with contextlib.closing(driver()) as db, holding_a_lease():
        time.sleep(0.5)  # the heartbeat thread's first move: a query, not a second
        raw_insert(db, "just-claimed")
        at = datetime.now(UTC)
    assert lag_ms(key_of("just-claimed"), at) < 1000


def test_the_setting_switches_with_migrate_and_back() -> None:
    raw_insert_cursor = connection.cursor()
    raw_insert_cursor.execute(f"INSERT INTO `{TABLE}` (name) VALUES ('default-1')")
    with override_settings(SNOWFLAKE={**settings.SNOWFLAKE, "MARIADB_KEYS": "trigger"}):
        call_command("migrate", verbosity=0)
        assert installed_keys(database(connection).installed_comment()) == "trigger"
        raw_insert_cursor.execute(f"INSERT INTO `{TABLE}` (name) VALUES ('trigger-1')")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.triggers "
                "WHERE trigger_schema = DATABASE() AND event_object_table = %s",
                [TABLE],
            )
            assert cursor.fetchone()[0] == 1
        assert [m.id for m in check_database_functions(databases=["default"])] == []
    # The setting changed back: the database is still on the trigger path until migrate.
    assert [m.id for m in check_database_functions(databases=["default"])] == [
        "django_snowflake.W054"
    ]
    call_command("migrate", verbosity=0)
    assert installed_keys(database(connection).installed_comment()) == "default"
    assert check_database_functions(databases=["default"]) == []
    raw_insert_cursor.execute(f"INSERT INTO `{TABLE}` (name) VALUES ('default-2')")
    raw_insert_cursor.close()
    keys = [key_of(name) for name in ("default-1", "trigger-1", "default-2")]
    assert keys == sorted(keys) and len(set(keys)) == 3  # each switch starts above the other


def test_migration_0006_moves_a_trigger_installation_to_the_column_default() -> None:
    """An installation of the version before (the trigger on every keyed table) gets the
    column default from the migration itself, before any post_migrate."""
    with override_settings(SNOWFLAKE={**settings.SNOWFLAKE, "MARIADB_KEYS": "trigger"}):
        call_command("migrate", verbosity=0)  # the version before's state: triggers
        call_command("migrate", "django_snowflake", "0004", verbosity=0)
    assert installed_keys(database(connection).installed_comment()) == "trigger"
    executor = MigrationExecutor(connection)
    executor.migrate([("django_snowflake", "0006_mariadb_key_default")])  # no post_migrate
    assert installed_keys(database(connection).installed_comment()) == "default"
    test_a_keyed_table_has_no_trigger_and_defaults_to_the_sequence()


def returning_keys(connection: Any) -> list[int]:
    """Ten raw INSERTs that leave the key out, and the keys the server gave them."""
    import MySQLdb

    keys = []
    with connection.cursor() as cursor:
        for _ in range(10):
            try:
                cursor.execute(f"INSERT INTO `{TABLE}` (name) VALUES ('raw') RETURNING id")
            except MySQLdb.IntegrityError:
                # A key the replicated rows already hold: refused, as the window allows.
                DUPLICATE_KEY_ERRORS.append(1)
                continue
            keys.append(int(cursor.fetchone()[0]))
    return keys


DUPLICATE_KEY_ERRORS: list[int] = []


def test_a_failover_with_a_process_running_issues_no_key_twice_after_its_first_beat(
    tmp_path: Path,
) -> None:
    """An asynchronous standby promoted after the primary went on issuing without it (killed
    -9): raw INSERTs on the new primary before the first heartbeat there have the sequence's
    own replication semantics (the window, measured); after it, none repeats a key the old
    primary returned."""
    import MySQLdb

    lease = 3
    snowflake = {"WORKER_ALLOCATOR": "database", "LEASE_SECONDS": lease}
    pair = Pair("mariadb")
    stop = tmp_path / "stop"
    try:
        database = "failover_keys"
        pair.sql(pair.primary, f"CREATE DATABASE {database}")
        (route,) = pair.routes()
        env = pair.env(route, database=database)
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "-v0"],
            env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "tests.settings",
                 "SNOWFLAKE_TEST_SETTINGS": json.dumps(snowflake)},
            check=True,
        )  # fmt: skip

        def connect(server: Any) -> Callable[[], Any]:
            return lambda: MySQLdb.connect(
                host="127.0.0.1", port=server.port, user=pair.primary.user, database=database,
                autocommit=True,
            )  # fmt: skip

        pair.catch_up()
        # A heartbeat reaching the standby (an alias for reads) leaves its sequence alone,
        # though the user may write to a read-only server: the skip there would diverge.
        with contextlib.closing(connect(pair.standby)()) as standby:
            assert move_clock(standby.cursor(), get_layout(), lead_units=1, hold_units=1) == ""
        process = start_process(env, tmp_path / "ids", stop, snowflake)
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        assert process.stdout.readline().startswith("first")

        promoted_at: list[float] = []
        skipped_at: list[float] = []

        def watch() -> None:
            # When the first heartbeat on the new primary recorded its incarnation.
            while not stop.exists():
                if promoted_at:
                    incarnation = pair.sql(
                        pair.standby,
                        f"SELECT incarnation = {MYSQL_INCARNATION_SQL} FROM {CLOCK_TABLE}",
                        database,
                    )
                    if incarnation == "1":
                        skipped_at.append(time.monotonic())
                        return
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        promote = pair.promote

        def promote_and_note() -> None:
            promote()
            promoted_at.append(time.monotonic())

        pair.promote = promote_and_note  # type: ignore[method-assign]
        returned, issued = keys_across_a_crash(
            pair,
            connect(pair.primary),
            connect(pair.standby),
            returning_keys,
            MySQLdb.OperationalError,
        )
        stop.touch()
        watcher.join()
        process.communicate(timeout=30)
    finally:
        stop.touch()
        pair.close()
    assert skipped_at, "no heartbeat moved the sequence on the new primary"
    window_ms = (skipped_at[0] - promoted_at[0]) * 1000
    layout = get_layout()
    # Keys issued after the skip carry a time at least the hold (LEASE_SECONDS) past the
    # promotion; those before it count up from the replayed sequence.
    skip_floor = max(returned) + (lease * 1000 // 2 << layout.time_shift)
    after = [key for key in issued if key > skip_floor]
    before = [key for key in issued if key <= skip_floor]
    twice = set(before) & set(returned)
    print(
        f"failover: returned {len(returned)}, issued {len(issued)} ({len(before)} before the "
        f"first beat, {len(twice)} of them issued twice, {len(DUPLICATE_KEY_ERRORS)} refused "
        f"as duplicates of replicated rows); window {window_ms:.0f} ms"
    )
    assert len(returned) > 500 and len(after) > 500, (len(returned), len(after))
    assert len(set(issued)) == len(issued)
    assert not set(after) & set(returned)  # 0 keys issued twice after the first beat
    assert window_ms < 1500
