"""Each signal of django_snowflake.signals, received from the real event: a claim, a heartbeat
renewal, a database stopped under a renewing process (a private server), a slot taken over, a
failover (rows of another incarnation), a clock stepped back (the injected clock), the
generator's waits, and the database clocks of MariaDB's column default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.dispatch import Signal
from django.utils import timezone

from django_snowflake import decode, generate, generate_many, get_generator, signals
from django_snowflake.exceptions import ClockMovedBackwards, WorkerLeaseLost
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.models import WorkerNode
from django_snowflake.testing import driven_clock
from harness import ROOT
from harness.private_server import PrivateServer, running
from harness.processes import Lines, reap
from tests.test_failover import old_row

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")
servers_only = pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite has no server to stop")


@contextmanager
def heard(signal: Signal) -> Iterator[list[dict[str, Any]]]:
    """The keyword arguments of every sending of ``signal`` inside the block."""
    received: list[dict[str, Any]] = []

    def receiver(**kwargs: Any) -> None:
        received.append(kwargs)

    signal.connect(receiver)
    try:
        yield received
    finally:
        signal.disconnect(receiver)


def wait_until(condition: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_lease_claimed(database_generator: Callable[..., SnowflakeGenerator]) -> None:
    generator = database_generator(LEASE_SECONDS=3)
    with heard(signals.lease_claimed) as claims:
        generate()
    [claim] = claims
    assert claim["sender"].__name__ == "DatabaseAllocator"
    assert claim["worker_id"] == generator.worker_id
    assert claim["database"] == "default"
    assert 0 < claim["seconds"] < 10


@pytest.mark.django_db(transaction=True)
def test_lease_renewed_by_the_heartbeat(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    generator = database_generator(LEASE_SECONDS=3)  # a renewal each second
    generate()
    with heard(signals.lease_renewed) as renewals:
        wait_until(lambda: renewals)
    renewal = renewals[0]
    assert renewal["worker_id"] == generator.worker_id
    assert renewal["late"] is False and renewal["failures"] == 0
    # Renewed to three quarters of the lease ahead, less the time the signal took to come.
    assert 1.5 < renewal["seconds_left"] <= 2.25


@pytest.mark.django_db(transaction=True)
def test_lease_lost_when_the_slot_is_taken_over(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    """The signal says no ID is issued under the lost lease any more: so it is when a receiver
    runs (on 5aff919 the heartbeat sent it before it revoked the lease, and a test reading the
    lease right after the signal failed in CI)."""
    generator = database_generator(LEASE_SECONDS=3)
    generate()
    worker_id = generator.worker_id
    held_when_sent = []

    def read_the_lease(**kwargs: Any) -> None:
        held_when_sent.append(generator.lease)

    with heard(signals.lease_lost) as losses:
        signals.lease_lost.connect(read_the_lease)
        try:
            # Another process's claim: the row carries its token now.
            WorkerNode.objects.filter(worker_id=worker_id).update(token="another-process")
            wait_until(lambda: losses)
        finally:
            signals.lease_lost.disconnect(read_the_lease)
    assert losses[0]["worker_id"] == worker_id
    assert held_when_sent == [None]
    assert generator.lease is None


@servers_only
@pytest.mark.django_db(transaction=True)
def test_failover_seen_with_failover_wait(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    generator = database_generator(LEASE_SECONDS=3, FAILOVER="wait")
    old_row(0, "another-server/1", generator.layout)
    with heard(signals.failover_seen) as failovers, pytest.raises(WorkerLeaseLost) as raised:
        generate()
    [failover] = failovers
    assert failover["database"] == "default"
    assert failover["worker_id"] == raised.value.worker_id
    assert failover["resume_at"] == raised.value.resume_at
    assert failover["incarnation"] == raised.value.incarnation
    assert failover["skipped"] is False


@servers_only
@pytest.mark.django_db(transaction=True)
def test_failover_seen_with_the_skip(database_generator: Callable[..., SnowflakeGenerator]) -> None:
    generator = database_generator(LEASE_SECONDS=3)
    old_row(0, "another-server/1", generator.layout)
    with heard(signals.failover_seen) as failovers:
        value = generate()
    [failover] = failovers
    assert failover["skipped"] is True and failover["database"] == "default"
    assert failover["worker_id"] == decode(value).worker_id
    # resume_at is the time of the first key: ahead of the clock, where the key is.
    assert failover["resume_at"] <= decode(value).timestamp
    assert failover["resume_at"] > timezone.now() + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("policy", "back_ms", "action"),
    [
        ("wait", 3, "waited"),
        ("borrow", 3, "borrowed"),
        ("ring", 3, "ring"),
        ("wait", 50, "raised"),
        ("raise", 1, "raised"),
    ],
)
def test_clock_moved_backwards(settings: Any, policy: str, back_ms: int, action: str) -> None:
    settings.SNOWFLAKE = {
        "WORKER_ALLOCATOR": "static",
        "WORKER_ID": 0,
        "CLOCK_ROLLBACK": policy,
    }
    with driven_clock() as clock, heard(signals.clock_moved_backwards) as steps:
        generate()
        clock.rewind(back_ms)
        try:
            for _ in range(3):  # one signal per step, not one per ID while behind
                generate()
        except ClockMovedBackwards:
            assert action == "raised"
    [step] = steps
    assert (step["behind_ms"], step["policy"], step["action"]) == (back_ms, policy, action)
    assert step["generator"] is get_generator()


def test_clock_sequence_policy_steps(settings: Any) -> None:
    settings.SNOWFLAKE = {
        "WORKER_ALLOCATOR": "static",
        "WORKER_ID": 0,
        "CLOCK_SEQUENCE_BITS": 2,
        "WORKER_BITS": 8,
        "CLOCK_ROLLBACK": "clock_sequence",
    }
    with driven_clock() as clock, heard(signals.clock_moved_backwards) as steps:
        generate()
        clock.rewind(50)
        generate()
    assert [step["action"] for step in steps] == ["clock_sequence"]


def test_generator_waited_for_the_next_unit_and_for_the_clock(settings: Any) -> None:
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}
    generator = get_generator()
    generator.ensure_lease()  # an ID that claims waits for the lease too
    with driven_clock() as clock, heard(signals.generator_waited) as waits:
        generate_many(generator.layout.max_sequence + 2)  # spends a unit: waits for the next
        clock.rewind(3)
        generate()  # the wait policy waits for the clock
    assert [wait["cause"] for wait in waits] == ["sequence", "clock"]
    assert waits[0]["seconds"] == pytest.approx(0.001)
    assert waits[1]["seconds"] == pytest.approx(0.003)
    assert all(wait["generator"] is generator for wait in waits)


@pytest.mark.django_db(transaction=True)
def test_generator_waited_for_the_lease(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    generator = database_generator(LEASE_SECONDS=3)
    with heard(signals.generator_waited) as waits:
        generate()  # the first ID claims
        with driven_clock(generator) as clock:
            generate()
            clock.advance(3000)  # past the lease's limit: the ID renews it first
            generate()
    # (The unit the first ID used counts as spent once a test clock drives the generator:
    # its second ID may wait for the next unit.)
    leases = [wait for wait in waits if wait["cause"] == "lease"]
    assert len(leases) == 2
    assert all(0 < wait["seconds"] < 10 for wait in leases)


def test_no_receiver_no_cost_inside_the_lock(settings: Any) -> None:
    """Events are told after the lock is released: a receiver may ask for an ID itself."""
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}
    inside: list[int] = []

    def receiver(**kwargs: Any) -> None:
        inside.append(generate())  # would deadlock under the generator's lock

    signals.clock_moved_backwards.connect(receiver)
    try:
        with driven_clock() as clock:
            generate()
            clock.rewind(2)
            generate()
    finally:
        signals.clock_moved_backwards.disconnect(receiver)
    assert len(inside) == 1


@pytest.mark.skipif(
    VENDOR != "mariadb" or os.environ.get("SNOWFLAKE_TEST_MARIADB_KEYS") == "trigger",
    reason="the heartbeats move MariaDB's key clock on the column-default path only",
)
@pytest.mark.django_db(transaction=True)
def test_database_clock_moved_and_behind() -> None:
    from django.db import connection

    from django_snowflake.database_keys import move_database_clocks
    from django_snowflake.health import database_health
    from django_snowflake.vendors.mysql.keys import TICK_EVENT

    # No heartbeat here (the tests' static allocator), nor the database's own event (as on a
    # server whose scheduler is off; test_clock_event turns it on): the clock falls behind.
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER EVENT {TICK_EVENT} DISABLE")
    try:
        time.sleep(0.6)  # a run of the event under way makes its last move
        with heard(signals.database_clock_moved) as moves:
            move_database_clocks()  # what each heartbeat does each second
        assert moves and moves[0]["database"] == "default"
        assert moves[0]["how"] in ("moved", "skipped")
        time.sleep(1.6)
        with heard(signals.database_clock_behind) as behind:
            [verdict] = [entry for entry in database_health() if entry.database == "default"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER EVENT {TICK_EVENT} ENABLE")
    assert not verdict.healthy
    assert behind[0]["database"] == "default" and behind[0]["behind_ms"] > 1000


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    with running(VENDOR, "signals") as private:
        yield private


def until(lines: Lines, wanted: Callable[[list[str]], bool], timeout: float) -> list[str]:
    """The first line (as words) for which ``wanted`` holds, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        line = lines.next(deadline)
        assert line, "no such line in time"
        if wanted(line.split(maxsplit=2)):
            return line.split(maxsplit=2)


def signal_named(name: str) -> Callable[[list[str]], bool]:
    return lambda words: words[:2] == ["signal", name]


@servers_only
def test_renewal_failed_while_the_database_is_stopped_then_renewed_late(
    server: PrivateServer, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "SNOWFLAKE_TEST_DB_HOST": "127.0.0.1",
        "SNOWFLAKE_TEST_DB_PORT": str(server.port),
        "SNOWFLAKE_TEST_DB_USER": server.user,
        "SNOWFLAKE_TEST_DB_NAME": "signals",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_SETTINGS": json.dumps({"LEASE_SECONDS": 3}),
    }
    migrate = [sys.executable, "-m", "django", "migrate", "django_snowflake", "-v0"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True)
    go = tmp_path / "go"
    command = [sys.executable, "-m", "tests.signals_process", "--go", str(go)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        lines = Lines(process)
        claimed = until(lines, signal_named("lease_claimed"), 30)
        worker_id = json.loads(claimed[2])["worker_id"]
        until(lines, signal_named("lease_renewed"), 5)
        server.kill()
        failed = json.loads(until(lines, signal_named("lease_renewal_failed"), 5)[2])
        assert failed["worker_id"] == worker_id and failed["database"] == "default"
        assert failed["seconds_left"] < 2.25
        again = json.loads(until(lines, signal_named("lease_renewal_failed"), 5)[2])
        assert again["seconds_left"] < failed["seconds_left"]  # the lease runs down
        server.start()
        renewed = json.loads(until(lines, signal_named("lease_renewed"), 20)[2])
        assert renewed["late"] is True and renewed["failures"] >= 2
        go.touch()
        until(lines, lambda words: words[0] == "done", 30)
        assert process.wait(timeout=30) == 0
    finally:
        reap([process])


def test_signals_are_documented() -> None:
    """Every signal is in docs/monitoring.rst with its arguments."""
    page = (ROOT / "docs" / "monitoring.rst").read_text()
    names = [name for name, value in vars(signals).items() if isinstance(value, Signal)]
    assert len(names) == 9
    for name in names:
        assert f"``{name}``" in page, name


def test_sending_to_no_receiver_costs_nothing_measurable() -> None:
    """The generator tells of an event only after a wait of a millisecond or more (the next
    time unit, the clock) or a claim, never per ID: sent to no receiver, its signal costs
    under 1% of that wait (CPU time, which the machine's load does not stretch as much)."""
    from django_snowflake.runtime import send_event

    facts = {"cause": "sequence", "seconds": 0.001, "generator": None}
    started = time.thread_time()
    for _ in range(10_000):
        send_event("generator_waited", facts)
    assert (time.thread_time() - started) / 10_000 < 0.01 * 0.001
