"""The database allocator against the real database: processes, forks, kills, claims.

The process-local generator on that allocator is tested in test_runtime.py, the claim at
``ready()`` in test_apps.py; the subprocesses come from ``harness`` (``spawn`` in conftest.py).
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.db import connection, connections
from django.db.models import QuerySet
from django.utils import timezone

from django_snowflake import decode, generate
from django_snowflake.database_slots import DATABASE_HOST
from django_snowflake.exceptions import (
    ClockMovedBackwards,
    ClockOffsetTooLarge,
    LayoutMismatch,
    NoWorkerAvailable,
    WorkerLeaseLost,
)
from django_snowflake.models import WorkerNode
from django_snowflake.testing import driven_clock
from harness import private_server
from harness.processes import expect_line, read_ids

from .rollbacks import rollback_outcomes
from .slots import expired_slot, held_slot

pytestmark = pytest.mark.django_db(transaction=True)


def test_processes_never_share_a_worker_id_or_an_id(spawn: Any, tmp_path: Path) -> None:
    go = tmp_path / "go"
    processes = [
        spawn("generate", "--count", "20000", "--out", str(tmp_path / f"ids{n}"), "--go", str(go))
        for n in range(8)
    ]
    workers = [int(expect_line(process, "claimed")[1]) for process in processes]
    assert len(set(workers)) == 8, workers  # all eight leases are held at this moment
    go.touch()
    for process in processes:
        assert process.wait(timeout=120) == 0
    ids = [i for n in range(8) for i in read_ids(tmp_path / f"ids{n}")]
    assert len(ids) == 160_000
    assert len(set(ids)) == len(ids)
    # A clean exit releases the slot (the database's own slot, for its key function, stays).
    held = WorkerNode.objects.filter(released_at__isnull=True)
    assert not held.exclude(host_name=DATABASE_HOST).exists()


def test_fork_after_use(spawn: Any, tmp_path: Path) -> None:
    out = tmp_path / "ids"
    process = spawn("fork", "--count", "5000", "--children", "3", "--out", str(out))
    assert process.wait(timeout=120) == 0
    lines = [line.split() for line in process.stdout.read().splitlines()]
    workers = [int(words[1]) for words in lines]
    assert len(workers) == 4 and len(set(workers)) == 4, lines
    ids = read_ids(out) + [i for n in range(3) for i in read_ids(Path(f"{out}.child{n}"))]
    assert len(ids) == 4 * 5000 + 5000
    assert len(set(ids)) == len(ids)


def test_claim_herd(spawn: Any, tmp_path: Path) -> None:
    start, go = tmp_path / "start", tmp_path / "go"
    barriers = ("--start", str(start), "--go", str(go))
    processes = [
        spawn("generate", "--count", "10", "--out", str(tmp_path / f"ids{n}"), *barriers)
        for n in range(32)
    ]
    for process in processes:  # every interpreter has imported Django
        expect_line(process, "ready", timeout=120)
    start.touch()
    claims = [expect_line(process, "claimed", timeout=120)[1:] for process in processes]
    go.touch()  # every lease was held at once until here
    for process in processes:
        assert process.wait(timeout=120) == 0
    workers = {int(worker) for worker, _ in claims}
    seconds = sorted(float(took) for _, took in claims)
    assert len(workers) == 32
    print(
        f"\n32-process claim herd on {WorkerNode.objects.db}: median "
        f"{statistics.median(seconds) * 1000:.1f} ms, worst {seconds[-1] * 1000:.1f} ms"
    )


def test_killed_holder_slot_is_reused_only_after_its_lease(spawn: Any, tmp_path: Path) -> None:
    short = {"LEASE_SECONDS": 3}
    issued = tmp_path / "held"
    holder = spawn("hold", "--out", str(issued), snowflake=short)
    held_worker = int(expect_line(holder, "claimed")[1])
    while not issued.exists() or issued.stat().st_size < 8 * 1000:
        time.sleep(0.01)
    # The next claimant is set up first: it claims as soon as the holder is dead, well inside
    # the lease (a fresh interpreter on a busy machine can take longer than the lease to start).
    start = tmp_path / "start"
    during = spawn(
        "generate",
        "--count",
        "10",
        "--out",
        str(tmp_path / "during"),
        "--start",
        str(start),
        snowflake=short,
    )
    expect_line(during, "ready", timeout=120)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    killed_ids = read_ids(issued)
    start.touch()
    assert int(expect_line(during, "claimed")[1]) != held_worker
    assert during.wait(timeout=60) == 0

    row = WorkerNode.objects.get(worker_id=held_worker)
    while row.lease_expires_at >= timezone.now():
        time.sleep(0.1)
        row.refresh_from_db()
    after = spawn("generate", "--count", "1000", "--out", str(tmp_path / "after"), snowflake=short)
    assert int(expect_line(after, "claimed")[1]) == held_worker
    assert after.wait(timeout=60) == 0
    new_ids = read_ids(tmp_path / "after")
    assert min(new_ids) > max(killed_ids)
    assert not set(new_ids) & set(killed_ids)


# The slot's high-water mark is ahead_ms ahead of the clock; MAX_ROLLBACK_MS is 5 (default).
@pytest.mark.parametrize(
    ("policy", "ahead_ms", "outcome"), rollback_outcomes(within=3, beyond=10_000)
)
def test_clock_behind_the_slot_high_water_at_claim(
    database_generator: Any, policy: str, ahead_ms: int, outcome: str
) -> None:
    # A single worker slot, so the claim cannot choose a fresh slot instead.
    bits = {"CLOCK_SEQUENCE_BITS": 2} if policy == "clock_sequence" else {}
    generator = database_generator(CLOCK_ROLLBACK=policy, WORKER_BITS=0, **bits)
    with driven_clock(generator) as clock:
        high_water = generator.layout.to_units(clock.ms + ahead_ms)
        clock_sequence = 1 if policy == "clock_sequence" else 0
        expired_slot(
            0, high_water, layout=generator.layout.fingerprint, clock_sequence=clock_sequence
        )
        if outcome == "raises":
            with pytest.raises(ClockMovedBackwards):
                generate()
            return
        parts = decode(generate())
    assert parts.worker_id == 0
    time_unit = generator.layout.to_units(int(parts.timestamp.timestamp() * 1000))
    if outcome == "new clock sequence":
        assert parts.clock_sequence == 2
        assert WorkerNode.objects.get().clock_sequence == 2  # stored before the ID used it
        assert time_unit < high_water
    else:
        assert time_unit > high_water
        assert clock.slept_ms > 0 if outcome == "waits" else clock.slept_ms == 0


def test_a_claim_never_uses_a_high_water_mark_that_changed_after_it_was_read(
    database_generator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = database_generator(WORKER_BITS=0)  # one slot, so the claim must take it
    with driven_clock(generator) as clock:
        now = generator.layout.to_units(clock.ms)
        expired_slot(0, now - 10, layout=generator.layout.fingerprint)
        real_fetch_all = QuerySet._fetch_all

        def read_then_old_holder_renews_issues_and_releases(self: QuerySet[Any]) -> None:
            real_fetch_all(self)
            for found in self._result_cache or []:
                if isinstance(found, WorkerNode) and found.token == "previous":
                    # Between the claim's read and its compare-and-set, the old holder
                    # renews (its lease had expired but nobody had taken the slot), issues
                    # IDs up to now + 2 and releases: the token stays, the mark moves.
                    WorkerNode.objects.filter(pk=found.pk).update(last_timestamp=now + 2)

        monkeypatch.setattr(QuerySet, "_fetch_all", read_then_old_holder_renews_issues_and_releases)
        first_id = generate()
    assert decode(first_id).worker_id == 0
    assert generator.layout.to_units(int(decode(first_id).timestamp.timestamp() * 1000)) > now + 2


def test_a_clock_sequence_that_cannot_be_stored_issues_nothing(
    database_generator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = database_generator(
        CLOCK_ROLLBACK="clock_sequence", CLOCK_SEQUENCE_BITS=2, WORKER_BITS=8
    )
    allocator = generator.lease_source
    with driven_clock(generator) as clock:
        before = generate()
        # Make the database unreachable for new connections, and drop the allocator's.
        allocator._run(lambda: connections["default"].close())
        unreachable = {"NAME": "/nonexistent/db.sqlite3"}
        if connection.vendor != "sqlite":
            unreachable = {"HOST": "127.0.0.1", "PORT": str(private_server.free_port())}
        for key, value in unreachable.items():
            monkeypatch.setitem(connection.settings_dict, key, value)
        clock.rewind(10)
        with pytest.raises(WorkerLeaseLost, match="Clock sequence 1 could not be stored") as raised:
            generate()
        error = raised.value
        assert (error.reason, error.database, error.clock_sequence) == (
            WorkerLeaseLost.DATABASE_ERROR,
            "default",
            1,
        )
        assert error.error is error.__cause__ and f"({error.error})" in str(error)
        assert generator.lease is None
        monkeypatch.undo()
        after = generate()
    assert decode(after).clock_sequence == 1
    assert before != after


def test_a_slot_whose_high_water_is_ahead_is_taken_last(database_generator: Any) -> None:
    generator = database_generator()
    ahead = generator.layout.to_units(generator.now() + 10_000)
    expired_slot(0, ahead, layout=generator.layout.fingerprint)
    assert decode(generate()).worker_id == 1


def test_a_claim_prefers_the_slot_this_host_held_last(database_generator: Any) -> None:
    generator = database_generator()
    fingerprint = generator.layout.fingerprint
    expired_slot(0, 0, layout=fingerprint)  # lower, but another host's
    expired_slot(5, 0, layout=fingerprint, host_name=socket.gethostname())
    assert decode(generate()).worker_id == 5
    assert WorkerNode.objects.get(worker_id=5).process_id == os.getpid()


@pytest.mark.parametrize("skew_ms", [16_000, -16_000])
def test_a_clock_too_far_off_the_database_claims_nothing(
    database_generator: Any, skew_ms: int
) -> None:
    # LEASE_SECONDS = 60 tolerates 15 s between this server's clock and the database's.
    generator = database_generator()
    with driven_clock(generator, start_ms=generator.now() + skew_ms):
        with pytest.raises(ClockOffsetTooLarge, match=r"clock is [+-]1[56]\d{3} ms off"):
            generate()
        assert generator.lease is None
    assert not WorkerNode.objects.exists()
    assert decode(generate()).worker_id == 0  # back on time, the claim goes through


def test_no_worker_available_when_every_slot_is_held(database_generator: Any) -> None:
    generator = database_generator(WORKER_BITS=2)
    for worker_id in range(4):
        held_slot(worker_id, layout=generator.layout.fingerprint)
    with pytest.raises(NoWorkerAvailable, match="All 4 worker slots are leased"):
        generate()


def test_layout_mismatch(database_generator: Any) -> None:
    generator = database_generator()
    expired_slot(5, 0, layout="v1/39-0-0-16-8/10ms/0")
    with pytest.raises(LayoutMismatch, match="v1/39-0-0-16-8/10ms/0"):
        generate()
    messages = checks.run_checks(databases=["default"], tags=[checks.Tags.database])
    assert [m.id for m in messages] == ["django_snowflake.E039"]
    assert generator.layout.fingerprint in messages[0].msg


@pytest.mark.parametrize("loss", ["re-owned", "deleted"])
def test_a_lost_lease_stops_issuing_and_the_next_id_reclaims(
    database_generator: Any, loss: str
) -> None:
    generator = database_generator(LEASE_SECONDS=3)
    before = [generate() for _ in range(100)]
    lease = generator.lease
    assert lease is not None
    rows = WorkerNode.objects.filter(worker_id=lease.worker_id)
    if loss == "deleted":  # as TransactionTestCase's flush does
        rows.delete()
    else:
        rows.update(token="someone else")
    deadline = time.monotonic() + 5
    while generator.lease is lease and time.monotonic() < deadline:
        time.sleep(0.05)  # the heartbeat runs every second
    assert generator.lease is None
    after = [generate() for _ in range(100)]
    assert generator.lease is not None
    assert min(after) > max(before)
    assert len(set(before + after)) == 200


def test_reaching_the_lease_limit_renews_before_issuing(database_generator: Any) -> None:
    generator = database_generator(LEASE_SECONDS=60)
    with driven_clock(generator) as clock:
        generate()
        old_limit = generator._limit
        clock.advance(50_000)  # past the reservation, before any heartbeat
        value = generate()
    assert generator._limit > old_limit
    row = WorkerNode.objects.get()
    assert row.last_timestamp >= generator.layout.to_units(clock.ms)
    assert decode(value).worker_id == row.worker_id
