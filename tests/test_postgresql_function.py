"""PostgreSQL's django_snowflake_id() on real servers: no lock queue under 32 sessions, and a
promoted standby never returns a key the crashed primary returned (issue 19, items 1 and 4).

The function is installed with the SQL ``migrate`` runs (``install_sql``) into databases of
these tests' own, on the shared server or on a private primary and standby (tests/ha_servers.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from django_snowflake.layout import BitLayout
from django_snowflake.vendors import install_sql
from tests.ha_servers import Pair, keys_across_a_crash

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's function")

TWITTER = BitLayout.preset("twitter")
BAIDU = BitLayout.preset("baidu")
SLOT = (1000, 0)


class Database:
    """A database of its own on the server at ``port``, with the function installed."""

    def __init__(self, port: int = 5432, name: str = "") -> None:
        self.port = port
        self.name = name or f"snowflake_fn_{uuid.uuid4().hex[:10]}"
        if not name:
            with contextlib.closing(self.connect("postgres")) as server:
                server.execute(f"CREATE DATABASE {self.name}")

    def connect(self, name: str = "") -> Any:
        import psycopg

        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=name or self.name,
            autocommit=True, connect_timeout=5,
        )  # fmt: skip

    def run(self, *statements: str) -> None:
        with contextlib.closing(self.connect()) as session:
            for statement in statements:
                session.execute(statement)  # type: ignore[arg-type]

    def install(self, layout: BitLayout) -> None:
        self.run(*install_sql("postgresql", layout, SLOT, alias="tests"))

    def drop(self) -> None:
        with contextlib.closing(self.connect("postgres")) as server:
            server.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def draw(session: Any, count: int) -> list[int]:
    rows = session.execute(f"SELECT django_snowflake_id() FROM generate_series(1, {count})")
    return [row[0] for row in rows]


def in_threads(count: int, work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.fixture
def database() -> Iterator[Database]:
    created = Database()
    try:
        yield created
    finally:
        created.drop()


def test_32_sessions_draw_unique_keys_and_none_waits_on_a_lock(database: Database) -> None:
    """At each new millisecond every session behind the clock used to queue on the one
    catch-up lock (pgbench at 32 clients: 335 transactions/s against BIGSERIAL's 11,475).
    The lock is now taken without waiting: no session is ever seen waiting for it."""
    database.install(TWITTER)
    keys: list[list[int]] = [[] for _ in range(32)]
    stop = threading.Event()
    waiting: list[int] = []

    def watch() -> None:
        with contextlib.closing(database.connect()) as session:
            while not stop.is_set():
                (count,) = session.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()
                waiting.append(count)
                time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()

    def work(index: int) -> None:
        with contextlib.closing(database.connect()) as session:
            for _ in range(40):
                keys[index] += draw(session, 5)

    try:
        in_threads(32, work)
    finally:
        stop.set()
        watcher.join()
    every = [key for session_keys in keys for key in session_keys]
    assert len(every) == len(set(every)) == 32 * 200
    assert all(session_keys == sorted(session_keys) for session_keys in keys)
    assert len(waiting) > 10 and max(waiting) == 0


def test_install_again_keeps_the_clock_and_acknowledges_no_new_incarnation(
    database: Database,
) -> None:
    database.install(TWITTER)
    with contextlib.closing(database.connect()) as session:
        before = draw(session, 100)
    database.install(TWITTER)
    with contextlib.closing(database.connect()) as session:
        after = draw(session, 100)
        (known,) = session.execute(
            "SELECT last_value FROM django_snowflake_id_incarnation"
        ).fetchone()
    assert before + after == sorted(set(before + after))
    # The same server: no skip (a key's time is within seconds of now, not a lease ahead).
    assert (after[0] >> TWITTER.time_shift) - (before[-1] >> TWITTER.time_shift) < 5_000
    assert known != 0


def test_a_base_it_cannot_read_is_refused_never_read_as_zero(database: Database) -> None:
    """The function reads base with pg_sequence_last_value(), NULL for a sequence that was
    never set (and, on some versions, for a role that may not read it): the install sets base,
    and a NULL read refuses instead of issuing keys from a base of 0."""
    import psycopg

    database.install(TWITTER)
    with contextlib.closing(database.connect()) as session:
        (called,) = session.execute("SELECT is_called FROM django_snowflake_id_base").fetchone()
        assert called
        session.execute("ALTER SEQUENCE django_snowflake_id_base RESTART")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="cannot read"):
            draw(session, 1)


@pytest.mark.failover
@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "ahead_s", "batch"),
    [(TWITTER, 0, 20), (TWITTER, 60, 20), (BAIDU, 0, 200)],
    ids=["same-clocks", "primary-clock-stepped-back-60s", "baidu-burst"],
)
def test_a_promoted_standby_never_returns_a_key_the_crashed_primary_returned(
    layout: BitLayout, ahead_s: int, batch: int
) -> None:
    """Load on the primary; the standby stops receiving; the primary goes on, then is killed
    (-9); the standby is promoted and issues. A clock stepped back leaves the logical clock
    ahead of it, made here by moving the primary's clock a minute past its wall clock (as
    its last catch-up before the step would have); the baidu layout's 200-key statements
    outrun its 8,192 keys a second. Before the skip: 13,272 and 432,248 keys issued twice."""
    pair = Pair("postgresql")
    try:
        primary = Database(pair.primary.port)
        primary.install(layout)
        if ahead_s:
            ahead = (time.time() * 1000 - layout.epoch_ms) // layout.time_unit_ms
            ahead = int(ahead + ahead_s * 1000 // layout.time_unit_ms)
            sb = layout.sequence_bits
            primary.run(
                "SELECT setval('django_snowflake_id_base', "
                f"({ahead} << {sb}) - (SELECT last_value FROM django_snowflake_id_counter))",
                f"SELECT setval('django_snowflake_id_anchor', {ahead})",
            )
        import psycopg

        promoted = Database(pair.standby.port, name=primary.name)
        returned, issued = keys_across_a_crash(
            pair,
            primary.connect,
            promoted.connect,
            lambda session: draw(session, batch),
            psycopg.OperationalError,
        )
    finally:
        pair.close()
    assert len(returned) > 1000 and len(issued) > 1000, (len(returned), len(issued))
    assert len(set(issued)) == len(issued)
    assert not set(returned) & set(issued)
