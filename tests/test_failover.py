"""Failover of the WorkerNode database: a standby that misses lease writes is promoted.

The first tests give the claim rows written under another incarnation, on the shared
servers. The scenario tests (marked ``failover``) run a real primary and asynchronous standby (``tests/ha_servers.py``) and real
processes generating IDs through it, and checks that no ID is ever issued twice, that
holders whose rows survived keep their slots, and how long new claims wait after the
failover. PostgreSQL under ``SNOWFLAKE_TEST_DB=postgresql``, MariaDB under ``mariadb``.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_snowflake import decode, generate
from django_snowflake.allocators.database import database_incarnation
from django_snowflake.exceptions import WorkerLeaseLost
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.layout import BitLayout
from django_snowflake.models import WorkerNode
from django_snowflake.testing import driven_clock
from harness.processes import read_ids
from tests.factories import ExpiredSlotFactory

from .ha_servers import ROOT, Pair, migrate, start_process

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")
LAYOUT = BitLayout.preset("twitter")

servers_only = pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite has no incarnation")


def scenario(test: Callable[..., None]) -> Callable[..., None]:
    """A test on a private primary and standby."""
    return pytest.mark.failover(
        pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite has no standby to fail over to")(test)
    )


def old_row(worker_id: int, incarnation: str, layout: BitLayout, **fields: Any) -> WorkerNode:
    """A slot whose lease ended an hour ago, last written under ``incarnation``."""
    row: WorkerNode = ExpiredSlotFactory(
        worker_id=worker_id, layout=layout.fingerprint, incarnation=incarnation, **fields
    )
    return row


@pytest.fixture
def generator(database_generator: Callable[..., SnowflakeGenerator]) -> SnowflakeGenerator:
    """The database allocator on a 3-second lease, so that a claim after a failover waits 3 s."""
    return database_generator(LEASE_SECONDS=3)


@servers_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_after_a_failover_skips_and_issues_at_once(
    generator: SnowflakeGenerator, caplog: pytest.LogCaptureFixture
) -> None:
    """``FAILOVER = "skip"`` (the default, issue 31): the claim issues at once, above anything
    a holder whose writes were lost could have used (the first sighting plus 1.25 leases),
    its keys never further ahead of the database's time than the skip, and the reservation
    of the skipped lease is in the row before the first key."""
    old_row(0, "another-server/1", generator.layout)
    before = time.time() * 1000
    first = generate()
    took = time.time() * 1000 - before
    assert took < 1000, f"the first ID took {took:.0f} ms"
    current = database_incarnation("default")
    held = WorkerNode.objects.get(incarnation=current)
    assert decode(first).worker_id == held.worker_id
    assert held.incarnation_since is not None
    # The floor counts from the claim's own sighting: its read of the incarnation, a few
    # milliseconds before the write that stored incarnation_since.
    floor_ms = held.incarnation_since.timestamp() * 1000 + 3000 + 750
    assert floor_ms - 100 <= unit_ms(first) and unit_ms(first) >= before + 3750 - 100
    # Never further ahead of the time it was issued than the skip (3.75 s less the tolerance).
    assert unit_ms(first) - before <= 3500 + took + 1
    # Its reservation, three quarters of the lease above the floor, was persisted first.
    assert held.last_timestamp >= generator.layout.to_units(int(unit_ms(first))) + 2250 - 1
    ids = [generate() for _ in range(20_000)]
    assert ids == sorted(ids) and first < ids[0] and len(set(ids)) == len(ids)
    assert "issues at once, its keys up to" in caplog.text


@servers_only
@pytest.mark.django_db(transaction=True)
def test_with_failover_wait_a_claim_holds_its_slot_and_issues_after_the_lease(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    generator = database_generator(LEASE_SECONDS=3, FAILOVER="wait")
    old_row(0, "another-server/1", generator.layout)
    started = time.time() * 1000
    with pytest.raises(WorkerLeaseLost, match="failed over or was restored") as raised:
        generate()
    assert re.search(r"slot \d+ and issues IDs from then on, in \d\.\d s", str(raised.value))
    error = raised.value
    assert (error.reason, error.database) == (WorkerLeaseLost.FAILOVER, "default")
    assert error.incarnation == database_incarnation("default")
    assert error.resume_at is not None and error.resume_in_seconds is not None
    assert 0 < error.resume_in_seconds <= 3.75 + 1
    assert error.resume_at.isoformat() in str(error)
    assert f"holds worker slot {error.worker_id} and" in str(error)
    current = database_incarnation("default")
    held = WorkerNode.objects.get(incarnation=current)
    assert held.incarnation_since is not None and error.worker_id == held.worker_id
    assert generator.lease is None  # nothing to issue from yet
    with pytest.raises(WorkerLeaseLost, match="failed over"):
        generate()  # still inside the wait: the same slot, still no ID
    assert WorkerNode.objects.filter(incarnation=current).count() == 1
    # Once the generator's clock passes the lease of any holder the database forgot:
    generator.use_clock(lambda: int(time.time() * 1000) + 4000, lambda seconds: None)
    value = generate()
    assert decode(value).worker_id == held.worker_id
    resume = held.incarnation_since.timestamp() * 1000 + 3000 + 750
    assert unit_ms(value) >= resume > started


@servers_only
@pytest.mark.django_db(transaction=True)
def test_an_incarnation_seen_a_lease_ago_claims_at_once(generator: SnowflakeGenerator) -> None:
    current = database_incarnation("default")
    old_row(0, "another-server/1", generator.layout)
    old_row(1, current, generator.layout, incarnation_since=timezone.now() - timedelta(seconds=5))
    generate()
    assert generator.lease is not None


@pytest.mark.django_db(transaction=True)
def test_rows_of_an_older_version_on_a_server_that_never_failed_over_claim_at_once(
    generator: SnowflakeGenerator,
) -> None:
    """An upgrade: rows with no incarnation, on a server never promoted nor restored (the
    shared test servers; SQLite has no incarnation at all)."""
    old_row(0, "", generator.layout)
    generate()
    assert generator.lease is not None
    row = WorkerNode.objects.get(worker_id=generator.worker_id)
    assert row.incarnation == database_incarnation("default")


class Worker:
    """A ``tests.ha_servers`` process and the lines it reported."""

    def __init__(
        self,
        pair: Pair,
        tmp_path: Path,
        name: str,
        servers: list[object],
        lease: int,
        start: Path | None = None,
    ) -> None:
        self.out = tmp_path / f"{name}.ids"
        self.stop = tmp_path / f"{name}.stop"
        env = pair.env(*servers, database="failover")  # type: ignore[arg-type]
        self.process = start_process(env, self.out, self.stop, {"LEASE_SECONDS": lease}, start)
        self.lines: queue.Queue[list[str]] = queue.Queue()
        self.seen: list[list[str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.split())

    def wait(self, *prefixes: str, timeout: float = 40) -> list[str]:
        """The words of the next line starting with one of ``prefixes``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                words = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {prefixes} line in {timeout} s: {self.seen}") from None
            self.seen.append(words)
            if words[0] in prefixes:
                return words

    def finish(self) -> list[int]:
        self.stop.touch()
        self.process.wait(timeout=30)
        return read_ids(self.out) if self.out.exists() else []

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def pair() -> Iterator[Pair]:
    servers = Pair(VENDOR)
    try:
        servers.primary.create_database("failover")
        migrate(servers.env(servers.primary, database="failover"))
        servers.catch_up()
        yield servers
    finally:
        servers.close()


def after_failover(pair: Pair) -> list[object]:
    """The servers a process started after the failover connects to: both on PostgreSQL
    (libpq picks the writable one), the promoted one on MariaDB."""
    if VENDOR == "postgresql":
        return [pair.primary, pair.standby]
    return [pair.standby]


def worker_ids(ids: list[int]) -> set[int]:
    return {LAYOUT.decompose(value).worker_id for value in ids}


def run_holders(pair: Pair, workers: list[Worker], tmp_path: Path, lease: int) -> list[Worker]:
    """Three processes that follow the primary, each issuing from its own slot."""
    holders = [Worker(pair, tmp_path, f"h{n}", pair.routes(), lease) for n in range(3)]  # type: ignore[arg-type]
    workers.extend(holders)
    for holder in holders:
        holder.wait("first")
    return holders


def unit_ms(value: int) -> float:
    return LAYOUT.decompose(value).timestamp.timestamp() * 1000


def assert_unique(*id_lists: list[int]) -> int:
    everything = [value for ids in id_lists for value in ids]
    duplicates = len(everything) - len(set(everything))
    assert duplicates == 0, f"{duplicates} duplicate IDs among {len(everything)}"
    return len(everything)


@scenario
def test_a_claim_the_standby_never_saw(
    pair: Pair, workers: list[Worker], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A claims slot 0 on the primary; the standby misses it and is promoted; B starts on the
    new primary and must not issue what A may still issue."""
    lease = 8
    pair.detach()
    a = Worker(pair, tmp_path, "a", [pair.primary], lease)
    workers.append(a)
    a.wait("first")
    time.sleep(0.5)
    pair.primary.kill()
    failed_over = time.time() * 1000
    pair.promote()
    b = Worker(pair, tmp_path, "b", after_failover(pair), lease)
    workers.append(b)
    first = b.wait("first", "resumed", timeout=lease * 3)
    a.wait("stopped", timeout=lease * 2)
    time.sleep(0.5)
    a_ids, b_ids = a.finish(), b.finish()
    checked = assert_unique(a_ids, b_ids)
    waited = (int(first[1]) - failed_over) / 1000
    with capsys.disabled():
        print(f"\n{VENDOR} lost claim: {checked} IDs, 0 duplicates, B waited {waited:.2f} s")
    # A's IDs end before its lease would have; B's begin after it.
    assert max(map(unit_ms, a_ids)) < min(map(unit_ms, b_ids))
    assert waited < lease * 1.25 + 5


@scenario
@pytest.mark.parametrize("first", ["newcomers", "a holder"])
def test_b_promotion_while_holders_renew(
    pair: Pair,
    workers: list[Worker],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    first: str,
) -> None:
    """Holders renew every second; the standby stops receiving for longer than a lease, so
    its rows show their leases expired; the primary dies mid-renewal and the standby is
    promoted. The holders reconnect and keep their slots; new processes claim at once and
    must issue nothing a holder may still issue. Who writes to the promoted server ``first``
    must not matter: a holder's renewal records when it first saw the new incarnation."""
    lease = 3
    holders = run_holders(pair, workers, tmp_path, lease)
    pair.catch_up()
    pair.detach()
    # Set up before the failover, so they claim before the holders' next renewal.
    go = tmp_path / "go"
    newcomers = [
        Worker(pair, tmp_path, f"c{n}", pair.routes(), lease, start=go)  # type: ignore[arg-type]
        for n in range(2)
    ]
    workers.extend(newcomers)
    for worker in newcomers:
        worker.wait("ready")
    time.sleep(lease + 1.3)
    pair.primary.kill()
    failed_over = time.time() * 1000
    pair.promote()
    if first == "a holder":
        wait_for_a_renewal(pair)
    go.touch()
    firsts = [int(worker.wait("first", "resumed")[1]) for worker in newcomers]
    time.sleep(lease)
    id_lists = [worker.finish() for worker in holders + newcomers]
    checked = assert_unique(*id_lists)
    waited = (max(firsts) - failed_over) / 1000
    with capsys.disabled():
        print(f"\n{VENDOR} mid-renewal, {first} first: {checked} IDs, 0 duplicates, new "
              f"claims waited {waited:.2f} s")  # fmt: skip
    # A holder whose writes were lost may issue until a lease after the failover: the
    # newcomers' keys lie above it (they skipped there at once: FAILOVER = "skip").
    newcomer_keys = [key for ids in id_lists[len(holders) :] for key in ids]
    assert min(map(unit_ms, newcomer_keys)) - failed_over > lease * 1000
    assert waited < 5


def wait_for_a_renewal(pair: Pair, timeout: float = 10) -> None:
    """Wait until a holder has renewed on the promoted standby."""
    deadline = time.monotonic() + timeout
    while pair.sql(pair.standby, f"SELECT count(*) {RENEWED_ON_STANDBY}", "failover") == "0":
        if time.monotonic() > deadline:
            raise AssertionError("no holder renewed on the promoted standby")
        time.sleep(0.05)


RENEWED_ON_STANDBY = {
    "postgresql": "FROM django_snowflake_workernode, pg_control_system() "
    "WHERE incarnation = system_identifier || '/2'",
    "mariadb": "FROM django_snowflake_workernode "
    "WHERE incarnation = CONCAT(@@server_id, '@', @@hostname, ':', @@port)",
}.get(VENDOR, "")


@scenario
def test_c_planned_switchover(
    pair: Pair, workers: list[Worker], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A switchover loses no write: holders keep their slots through it and record the new
    incarnation; a process started after it issues nothing twice."""
    lease = 3
    holders = run_holders(pair, workers, tmp_path, lease)
    before = [worker_ids(read_ids(holder.out)) for holder in holders]
    pair.catch_up()
    switched = time.time() * 1000
    pair.switch_over()
    newcomer = Worker(pair, tmp_path, "c", pair.routes(), lease)  # type: ignore[arg-type]
    workers.append(newcomer)
    first = int(newcomer.wait("first", "resumed")[1])
    time.sleep(lease)
    id_lists = [worker.finish() for worker in [*holders, newcomer]]
    checked = assert_unique(*id_lists)
    for holder, slots, ids in zip(holders, before, id_lists[:-1], strict=True):
        assert worker_ids(ids) == slots, f"{holder.seen}"
        assert max(map(unit_ms, ids)) > switched + 1000, "the holder stopped at the switchover"
    held = pair.sql(
        pair.standby,
        "SELECT DISTINCT incarnation FROM django_snowflake_workernode",
        database="failover",
    )
    incarnation = {
        "postgresql": "SELECT system_identifier || '/2' FROM pg_control_system()",
        "mariadb": "SELECT CONCAT(@@server_id, '@', @@hostname, ':', @@port)",
    }[VENDOR]
    assert held == pair.sql(pair.standby, incarnation)
    with capsys.disabled():
        print(f"\n{VENDOR} switchover: {checked} IDs, 0 duplicates, the new claim waited "
              f"{(first - switched) / 1000:.2f} s")  # fmt: skip


@scenario
def test_W030_asynchronous_standby(pair: Pair) -> None:
    """The check warns on the primary, which streams to an asynchronous standby."""
    env = {
        **os.environ,
        **pair.env(pair.primary, database="failover"),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_SETTINGS": "{}",
    }
    if VENDOR == "mariadb":
        pair.sql(pair.primary, "SELECT 1")  # the replica registers when it connects
    command = [sys.executable, "-m", "django", "check", "--database", "default"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert "django_snowflake.W030" in done.stderr + done.stdout, done.stderr


@pytest.mark.django_db(transaction=True)
def test_a_renewal_under_a_new_incarnation_records_when_it_first_saw_it(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    """MariaDB assigns an UPDATE's columns left to right, each seeing those before it: a
    renewal that set the incarnation first kept the old incarnation's time, so a claim after
    it trusted that the failover was long past and issued at once (CI, scenario (b): 1,959
    duplicate IDs)."""
    generator = database_generator(LEASE_SECONDS=60)
    with driven_clock(generator) as clock:
        generate()
        rows = WorkerNode.objects.filter(worker_id=generator.worker_id, process_id=os.getpid())
        long_ago = timezone.now() - timedelta(hours=1)
        rows.update(incarnation="another-server/1", incarnation_since=long_ago)
        clock.advance(50_000)  # past the reservation: the next ID renews
        generate()
    row = rows.get()
    assert row.incarnation == database_incarnation("default")
    assert row.incarnation_since is not None
    assert row.incarnation_since > timezone.now() - timedelta(minutes=1)
