"""PgBouncer in front of PostgreSQL (docs: "Connection poolers"), issue 25.

A real PgBouncer (Debian's ``pgbouncer``, ``harness/pgbouncer.py``) started by each test on a
port of its own, in front of the shared server, and real processes (``tests/pooled_process.py``)
saving rows with the ORM through it under ``SnowflakeAutoField``, with the settings the docs
give (``DISABLE_SERVER_SIDE_CURSORS``, psycopg's prepared statements left off).

Transaction pooling: ORM inserts from three processes while their leases renew, across a
``RECONNECT``, a restart of PgBouncer shorter than the lease and one longer; raw keyless INSERTs (the database
function) from eight connections; 300 statements cancelled by ``statement_timeout``.
Session pooling: a pool sized to the app's threads starves the lease's own connection; one
more per process does not. Without ``pgbouncer`` they skip, except under ``CI``, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from django_snowflake import decode
from harness import pgbouncer
from harness.pgbouncer import PgBouncer
from harness.processes import Lines, read_ids

from .test_postgresql_function import TWITTER, Database, in_threads

MISSING = pgbouncer.missing()
LEASE_SECONDS = 3

pytestmark = [
    pytest.mark.pgbouncer,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PgBouncer is PostgreSQL's"),
    pytest.mark.skipif(
        bool(MISSING) and not os.environ.get("CI"), reason=f"no PgBouncer here: {MISSING} missing"
    ),
]


@pytest.fixture
def bouncers() -> Iterator[Callable[..., PgBouncer]]:
    """Start a PgBouncer of a mode and settings; each one is stopped and removed at the end,
    before the test database is dropped (its server connections would keep it)."""
    if MISSING:
        pytest.fail(f"The PgBouncer tests must run in CI, but {MISSING} is missing.")
    started: list[PgBouncer] = []

    def start(mode: str, **settings: Any) -> PgBouncer:
        bouncer = PgBouncer(mode, **settings)
        started.append(bouncer)
        bouncer.start()
        return bouncer

    yield start
    for bouncer in started:
        bouncer.close()


class App:
    """``count`` processes of ``threads`` threads saving rows through ``bouncer``."""

    def __init__(
        self, spawn: Callable[..., Any], bouncer: PgBouncer, tmp_path: Path, count: int,
        threads: int,
    ) -> None:  # fmt: skip
        self.stop = tmp_path / "stop"
        self.outs = [tmp_path / f"keys{number}" for number in range(count)]
        environ = {
            "DJANGO_SETTINGS_MODULE": "tests.pooled_process",
            "SNOWFLAKE_TEST_DB_PORT": str(bouncer.port),
        }
        options = ["--stop", str(self.stop), "--threads", str(threads)]
        self.processes = [
            spawn(
                "--out",
                str(out),
                *options,
                module="tests.pooled_process",
                snowflake={"LEASE_SECONDS": LEASE_SECONDS},
                environ=environ,
            )
            for out in self.outs
        ]
        self.lines = [Lines(process) for process in self.processes]

    def expect(self, word: str, timeout: float) -> list[list[str]]:
        """The next line of each process, which must start with ``word``, within ``timeout``."""
        deadline = time.monotonic() + timeout
        lines = [lines.next(deadline).split() for lines in self.lines]
        missing = [number for number, words in enumerate(lines) if words[:1] != [word]]
        assert not missing, f"no {word!r} from processes {missing} in {timeout} s: {lines}"
        return lines

    def finish(self) -> tuple[list[int], list[list[str]]]:
        """Stop them: every key they saved, and their ``done`` lines (the lines before are
        skipped: a starved claim may get its connection from a thread that stopped)."""
        self.stop.touch()
        deadline, done = time.monotonic() + 30, []
        for lines in self.lines:
            words = lines.next(deadline).split()
            while words and words[0] != "done":
                words = lines.next(deadline).split()
            done.append(words)
        assert all(done), f"not every process ended in 30 s: {done}"
        for process in self.processes:
            assert process.wait(timeout=30) == 0
        return [key for out in self.outs for key in read_ids(out)], done


def renewed(app: App, timeout: float = 3) -> None:
    """Wait until every process of ``app`` has renewed its lease since this call, as the
    ``WorkerNode`` table on the server itself (not through the pooler) says."""
    pids = {process.pid for process in app.processes}
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        (since,) = cursor.fetchone()
        deadline = time.monotonic() + timeout
        while True:
            cursor.execute(
                "SELECT process_id FROM django_snowflake_workernode WHERE released_at IS NULL "
                "AND host_name <> '(database)' AND heartbeat_at > %s",
                [since],
            )
            late = pids - {pid for (pid,) in cursor.fetchall()}
            if not late:
                return
            assert time.monotonic() < deadline, f"no renewal in {timeout} s by processes {late}"
            time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_orm_inserts_through_transaction_pooling_survive_a_reconnect_and_a_restart(
    spawn: Callable[..., Any], bouncers: Callable[..., PgBouncer], tmp_path: Path
) -> None:
    bouncer = bouncers("transaction", pool_size=4)
    app = App(spawn, bouncer, tmp_path, count=3, threads=2)
    app.expect("connected", 30)
    app.expect("first", 10)
    renewed(app)  # every LEASE_SECONDS / 3, through the pooler
    renewed(app)
    bouncer.admin("RECONNECT")  # its server connections replaced as each goes idle
    renewed(app)
    # Shorter than the reservation left (3/4 of the lease past the last renewal): only the
    # saves fail while it is away; the renewals retry each second and the keys never stop.
    bouncer.restart(pause=1)
    app.expect("failed", 1)
    short = app.expect("resumed", 10)
    renewed(app)
    # Longer than the lease: each process stops issuing when its reservation runs out
    # (WorkerLeaseLost), and renews or claims through the pooler once it is back.
    bouncer.restart(pause=LEASE_SECONDS + 1)
    back = time.monotonic()
    app.expect("failed", 1)
    long = app.expect("resumed", 10)
    resumed = time.monotonic() - back
    renewed(app)
    assert all(line[1:] == ["OperationalError"] for line in short), short
    assert all("WorkerLeaseLost" in line for line in long), long
    keys, done = app.finish()
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM testapp_tag")
        rows = [row[0] for row in cursor.fetchall()]
    assert len(keys) == len(set(keys)) > 500
    assert len(rows) == len(set(rows))
    # A save whose connection broke after its COMMIT reached the server is a row the process
    # counted as failed: as with any database, the client cannot know.
    assert set(keys) <= set(rows)
    assert len(rows) - len(keys) <= sum(int(line[1]) for line in done)
    workers = {out: {decode(key).worker_id for key in read_ids(out)} for out in app.outs}
    assert all(workers.values())
    # Only what a lost connection raises, and what a lapsed lease raises while it is away.
    assert {name for line in done for name in line[2:]} <= {
        "OperationalError", "InterfaceError", "WorkerLeaseLost"
    }  # fmt: skip
    print(f"{len(keys)} keys, 0 duplicates; resumed {resumed:.2f} s after the long restart")
    print(f"errors: {short} (1 s), {long} ({LEASE_SECONDS + 1} s); {done}")


class Pooled:
    """A database of its own with the function installed and a keyless table, ``pooled``,
    behind a PgBouncer in transaction mode."""

    def __init__(self, bouncer: PgBouncer, database: Database) -> None:
        self.bouncer, self.database = bouncer, database

    def connect(self, *, autocommit: bool = True) -> Any:
        """A connection through the pooler, without psycopg's prepared statements (as
        Django's): PgBouncer 1.18's transaction pooling gives the next execution of a
        statement prepared on one server connection to another ("prepared statement _pg3_0
        does not exist", "... already exists": in 6 of 8 threads of the test below with
        psycopg's default, prepare_threshold=5)."""
        return psycopg.connect(
            host="127.0.0.1", port=self.bouncer.port, user="postgres",
            dbname=self.database.name, autocommit=autocommit, connect_timeout=5,
            prepare_threshold=None,
        )  # fmt: skip


@pytest.fixture
def pooled(bouncers: Callable[..., PgBouncer]) -> Iterator[Pooled]:
    bouncer = bouncers("transaction", pool_size=4)
    database = Database()
    try:
        database.install(TWITTER)
        # No key constraint: a repeated key is counted, not refused.
        database.run("CREATE TABLE pooled (id bigint DEFAULT django_snowflake_id(), n int)")
        yield Pooled(bouncer, database)
    finally:
        bouncer.stop()  # its server connections would keep the database
        database.drop()


def test_raw_keyless_inserts_through_transaction_pooling_repeat_no_key(pooled: Pooled) -> None:
    def insert(number: int) -> None:
        with contextlib.closing(pooled.connect()) as session:
            for _ in range(100):
                session.execute("INSERT INTO pooled (n) VALUES (%s), (%s)", [number, number])
                session.execute(
                    "INSERT INTO pooled (n) SELECT %s FROM generate_series(1, 20)", [number]
                )

    in_threads(8, insert)
    with contextlib.closing(pooled.database.connect()) as session:
        rows, distinct = session.execute(
            "SELECT count(*), count(DISTINCT id) FROM pooled"
        ).fetchone()
    assert rows == distinct == 8 * 100 * 22


def test_statements_cancelled_through_transaction_pooling_leave_no_lock_and_no_lag(
    pooled: Pooled,
) -> None:
    cancelled = []

    def cancel(number: int) -> None:
        # SET LOCAL: a session's SET would stay on a server connection other clients get.
        with contextlib.closing(pooled.connect(autocommit=False)) as session:
            for _ in range(75):
                with contextlib.suppress(psycopg.errors.QueryCanceled):
                    with session.transaction():
                        session.execute("SET LOCAL statement_timeout = '3ms'")
                        session.execute("INSERT INTO pooled SELECT FROM generate_series(1, 3000)")
                    continue
                cancelled.append(number)

    in_threads(4, cancel)
    assert len(cancelled) == 300
    held, lags = held_and_lags(pooled)
    print(f"{held} advisory locks held; keys up to {max(lags):.0f} ms behind the clock")
    assert held == 0
    assert max(lags) <= 50


def held_and_lags(pooled: Pooled) -> tuple[int, list[float]]:
    """The advisory locks held in the database, and how far behind the clock (ms) the keys
    of fresh sessions are, through the pooler (on its server connections, a lock holder's
    among them) and on the server directly, for a second."""
    with contextlib.closing(pooled.database.connect()) as server:
        held = server.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE l.locktype = 'advisory' AND d.datname = %s",
            [pooled.database.name],
        ).fetchone()[0]
    lags: list[float] = []
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        for connect in (pooled.connect, pooled.database.connect):
            with contextlib.closing(connect()) as session:
                key, now = session.execute(
                    "SELECT django_snowflake_id(), EXTRACT(EPOCH FROM clock_timestamp()) * 1000"
                ).fetchone()
            lags.append(float(now) - TWITTER.decompose(key).timestamp.timestamp() * 1000)
        time.sleep(0.02)
    return held, lags


def test_a_storm_of_pg_cancel_backend_through_transaction_pooling_leaves_no_lock(
    pooled: Pooled,
) -> None:
    """Issue 32: pg_cancel_backend() fired at calls in flight (7,208 through PgBouncer) left
    one session holding the catch-up's lock, and keys 3.8 to 10.6 s behind. Four clients
    insert through the pooler while another connection cancels whichever of the database's
    server sessions is running, at random moments, for 4 s."""
    stop = threading.Event()
    cancels = [0]

    def insert(number: int) -> None:
        with contextlib.closing(pooled.connect()) as session:
            while not stop.is_set():
                with contextlib.suppress(psycopg.errors.QueryCanceled):
                    session.execute("INSERT INTO pooled (n) SELECT 1 FROM generate_series(1, 200)")

    def storm() -> None:
        chance = random.Random(32)
        with contextlib.closing(pooled.database.connect()) as server:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                cancels[0] += server.execute(
                    "SELECT count(*) FILTER (WHERE pg_cancel_backend(pid)) FROM "
                    "pg_stat_activity WHERE datname = %s AND state = 'active' "
                    "AND pid <> pg_backend_pid()",
                    [pooled.database.name],
                ).fetchone()[0]
                time.sleep(chance.uniform(0, 0.002))
        stop.set()

    canceller = threading.Thread(target=storm)
    canceller.start()
    in_threads(4, insert)
    canceller.join()
    held, lags = held_and_lags(pooled)
    print(f"{cancels[0]} cancels; {held} advisory locks held; keys up to {max(lags):.0f} ms behind")
    assert cancels[0] > 1000
    assert held == 0
    assert max(lags) <= 50


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("spare", "starved"), [(0, True), (1, False)], ids=["pool-of-the-threads", "one-more"]
)
def test_session_pooling_needs_one_more_connection_per_process_for_the_lease(
    spawn: Callable[..., Any], bouncers: Callable[..., PgBouncer], tmp_path: Path,
    spare: int, starved: bool,
) -> None:  # fmt: skip
    count, threads = 2, 2
    # A short query_wait_timeout: a starved claim fails in 1 s instead of PgBouncer's 120.
    bouncer = bouncers("session", pool_size=count * (threads + spare), query_wait_timeout=1)
    app = App(spawn, bouncer, tmp_path, count=count, threads=threads)
    app.expect("connected", 30)
    if starved:
        # Each process's claim waits for a server connection its own threads hold, and
        # PgBouncer drops it after query_wait_timeout; the next waits again.
        with pytest.raises(AssertionError, match="no 'first'"):
            app.expect("first", 3)
        name = str(connection.settings_dict["NAME"])
        waiting = 0
        for _ in range(5):  # a claim PgBouncer just dropped is back in the queue in 50 ms
            waiting = max(waiting, int(bouncer.pool(name)["cl_waiting"]))
            time.sleep(0.1)
        _, done = app.finish()
        print(f"no key in 3 s, {waiting} claims waiting; {done}")
        assert waiting >= count
        # A claim that waited its query_wait_timeout raised WorkerLeaseLost (one that started
        # late may still have been waiting): nothing else failed.
        assert {name for line in done for name in line[2:]} <= {"WorkerLeaseLost"}
        return
    first = max(float(line[1]) for line in app.expect("first", 3))
    renewed(app)
    keys, done = app.finish()
    print(f"first keys in {first:.2f} s; {len(keys)} keys; {done}")
    assert len(keys) == len(set(keys)) > 0
    assert all(line[1] == "0" for line in done)
