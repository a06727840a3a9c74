from __future__ import annotations

import builtins
import json
import operator
import os
import random
import signal
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import django_snowflake
from django_snowflake import generator as generator_module
from django_snowflake import runtime
from django_snowflake.exceptions import (
    ClockMovedBackwards,
    ClockOutsideLifespan,
    SnowflakeError,
    WorkerLeaseLost,
)
from django_snowflake.generator import (
    POLICIES,
    Lease,
    SnowflakeGenerator,
    precise_sleep,
    system_clock,
)
from django_snowflake.layout import BitLayout
from django_snowflake.testing import FakeClock

DAY_MS = 86_400_000

LAYOUTS = {
    "twitter": BitLayout.preset("twitter"),
    "sonyflake": BitLayout.preset("sonyflake"),
    "baidu": BitLayout.preset("baidu"),
    "js_safe": BitLayout.preset("js_safe"),
    "tiny": BitLayout(time_bits=30, worker_bits=3, sequence_bits=2),
    "tiny_10ms": BitLayout(
        time_bits=30, datacenter_bits=1, worker_bits=2, sequence_bits=3, time_unit_ms=10
    ),
    "odd_3ms": BitLayout(time_bits=34, worker_bits=4, sequence_bits=4, time_unit_ms=3),
}
CLOCK_SEQUENCE_LAYOUTS = {
    "twitter_cs": BitLayout(time_bits=41, clock_sequence_bits=2, worker_bits=8, sequence_bits=12),
    "sonyflake_cs": BitLayout(
        time_bits=39, clock_sequence_bits=2, worker_bits=14, sequence_bits=8, time_unit_ms=10
    ),
    "baidu_cs": BitLayout(
        time_bits=28, clock_sequence_bits=2, worker_bits=20, sequence_bits=13, time_unit_ms=1000
    ),
    "js_safe_cs": BitLayout(time_bits=41, clock_sequence_bits=2, worker_bits=4, sequence_bits=6),
    "tiny_cs": BitLayout(
        time_bits=30, datacenter_bits=1, clock_sequence_bits=2, worker_bits=3, sequence_bits=2
    ),
    "tiny_cs1_7ms": BitLayout(
        time_bits=32, clock_sequence_bits=1, worker_bits=2, sequence_bits=3, time_unit_ms=7
    ),
}
ALL_LAYOUTS = LAYOUTS | CLOCK_SEQUENCE_LAYOUTS
COMBINATIONS = [
    (policy, name)
    for policy in POLICIES
    for name in (CLOCK_SEQUENCE_LAYOUTS if policy == "clock_sequence" else ALL_LAYOUTS)
]
BOUNDS = [0, 1, 5, 20, 1500]

TOTALS: Counter[str] = Counter()


class FakeSource:
    """A lease source that reserves ``chunk`` units ahead and hands floors above past leases."""

    def __init__(self, layout: BitLayout, clock: FakeClock, *, workers=(1, 2), chunk=5) -> None:
        self.layout = layout
        self.clock = clock
        self.workers = workers
        self.chunk = chunk
        self.turn = 0
        self.reserved = dict.fromkeys(workers, -1)
        self.clock_sequence = dict.fromkeys(workers, 0)
        self.current: Lease | None = None
        self.limit = -1
        self.floor = -1
        self.floor_clock_sequence = 0
        self.acquires = 0

    @property
    def next_worker(self) -> int:
        return self.workers[self.turn % len(self.workers)]

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        now = self.layout.to_units(self.clock())
        current = self.current
        if current is not None and generator.lease is current:
            worker, self.limit = current.worker_id, max(self.limit, now + 1) + self.chunk
        else:
            worker = self.next_worker
            self.turn += 1
            self.floor = self.reserved[worker]
            self.floor_clock_sequence = self.clock_sequence[worker]
            self.limit = max(self.floor + 1, now + 1) + self.chunk
        self.current = Lease(
            worker,
            floor=self.floor,
            limit=self.limit,
            clock_sequence=self.clock_sequence[worker],
        )
        self.reserved[worker] = max(self.reserved[worker], self.limit - 1)
        self.acquires += 1
        return self.current

    def extend(self, generator: SnowflakeGenerator, units: int) -> bool:
        assert self.current is not None
        limit = self.limit + units
        self.reserved[self.current.worker_id] = max(
            self.reserved[self.current.worker_id], limit - 1
        )
        if generator.extend(self.current, limit):
            self.limit = limit
            return True
        return False

    def persist(self, value: int) -> None:
        assert self.current is not None
        self.clock_sequence[self.current.worker_id] = value


class SystemTime:
    """The ``time`` module as the generator sees it, with the system clock reading ``clock``."""

    def __init__(self, clock: FakeClock, offset_ns: int) -> None:
        self.clock, self.offset_ns = clock, offset_ns

    def time_ns(self) -> int:
        return self.clock.ms * 1_000_000 + self.offset_ns

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


class Walk:
    """Drives one generator on a FakeClock and checks every ID it issues against a model.

    With ``system_ns`` set the generator runs on the system clock (and so on its fast path),
    made to read the FakeClock plus that many nanoseconds.
    """

    def __init__(
        self,
        layout: BitLayout,
        policy: str,
        max_rollback_ms: int,
        *,
        leased: bool,
        worker_id: int = 1,
        datacenter_id: int = 0,
        clock_sequence: int = 0,
        start_ms: int = 0,
        chunk: int = 5,
        system_ns: int | None = None,
    ) -> None:
        self.layout, self.policy, self.bound = layout, policy, max_rollback_ms
        self.clock = FakeClock(layout.epoch_ms + DAY_MS + start_ms)
        self.source = FakeSource(layout, self.clock, chunk=chunk) if leased else None
        self.worker_id, self.datacenter_id = worker_id, datacenter_id
        self.reported: list[int] = []
        workers = self.source.workers if leased else (worker_id,)
        self.known = {(worker, 0 if leased else clock_sequence) for worker in workers}
        self.generator = SnowflakeGenerator(
            layout,
            None if leased else worker_id,
            datacenter_id=datacenter_id,
            clock=None if system_ns is not None else self.clock,
            sleep=self.clock.sleep,
            rollback=policy,
            max_rollback_ms=max_rollback_ms,
            clock_sequence=clock_sequence,
            on_clock_sequence=self.on_clock_sequence,
            lease_source=self.source,
        )
        self.high = -1
        self.clock_sequence = clock_sequence
        self.last_id = -1
        self.issued: set[int] = set()
        self.pairs: set[tuple[int, int]] = set()
        self.stale: Lease | None = None
        self.system_time = None if system_ns is None else SystemTime(self.clock, system_ns)

    def on_clock_sequence(self, value: int) -> None:
        worker = self.worker_id if self.source is None else self.source.current.worker_id
        assert (worker, value) not in self.pairs
        self.known.add((worker, value))
        self.reported.append(value)
        if self.source is not None:
            self.source.persist(value)

    def run(self, steps: Sequence[tuple[str, int]]) -> None:
        if self.system_time is None:
            patch = nullcontext()
        else:
            patch = mock.patch.object(generator_module, "time", self.system_time)
        with patch:
            self.walk(steps)
        TOTALS["walks"] += 1
        TOTALS["ids"] += len(self.issued)

    def walk(self, steps: Sequence[tuple[str, int]]) -> None:
        layout = self.layout
        for kind, amount in steps:
            if kind == "advance":
                self.clock.advance(amount)
            elif kind == "rewind":
                self.clock.rewind(amount)
            elif kind == "rewind_units":
                self.clock.rewind(min(amount * layout.time_unit_ms, 10_000))
            elif kind == "next_ids" and amount == 0:
                assert self.generator.next_ids(0) == []
            elif kind == "next_id":
                for _ in range(amount):
                    self.issue(kind, 1)
            elif kind in ("next_ids", "burst"):
                self.issue(kind, amount)
            elif kind == "drop" and self.source is not None:
                self.drop(amount)
            elif kind == "extend" and self.source is not None:
                self.extend(amount)

    def drop(self, relinquish: int) -> None:
        source, generator = self.source, self.generator
        if source.current is None:
            return
        if relinquish:
            lease, high = generator.relinquish()
            assert lease is source.current
            assert high == self.high
        else:
            generator.revoke(source.current)
        assert generator.lease is None
        self.stale, source.current = source.current, None

    def extend(self, units: int) -> None:
        if self.source.current is not None:
            assert self.source.extend(self.generator, units)
        elif self.stale is not None:
            assert not self.generator.extend(self.stale, self.source.limit + units)

    def predict(self, now: int, t: int) -> tuple[int, int, str | None]:
        """The generator's high unit and clock sequence, and what it must do at ``now``."""
        high, clock_sequence = self.high, self.clock_sequence
        if self.source is not None and self.generator.lease is None:
            worker = self.source.next_worker
            high = max(high, self.source.reserved[worker])
            clock_sequence = self.source.clock_sequence[worker]
        if t >= high:
            return high, clock_sequence, None
        behind = self.layout.unit_start_ms(high) - now
        if self.policy == "raise":
            return high, clock_sequence, "raise"
        if self.policy == "clock_sequence" and clock_sequence < self.layout.max_clock_sequence:
            return high, clock_sequence, "bump"
        return high, clock_sequence, "raise" if behind > self.bound else None

    def call(self, kind: str, amount: int) -> list[int]:
        if kind == "next_id":
            return [self.generator.next_id()]
        if kind == "next_ids":
            return self.generator.next_ids(amount)
        capacity = self.layout.max_sequence + 1
        return self.generator.next_ids((amount if capacity <= 256 else 1) * capacity + 1)

    def issue(self, kind: str, amount: int) -> None:
        layout, source = self.layout, self.source
        now = self.clock()
        t = layout.to_units(now)
        high, clock_sequence, outcome = self.predict(now, t)
        reported = len(self.reported)
        try:
            ids = self.call(kind, amount)
        except ClockMovedBackwards as exc:
            assert outcome == "raise", (now, t, high)
            assert exc.behind_ms == layout.unit_start_ms(high) - now
            assert exc.policy == self.policy
            if self.policy != "raise":
                assert exc.behind_ms > self.bound
            self.high, self.clock_sequence = high, clock_sequence
            assert self.reported[reported:] == []
            return
        assert outcome != "raise", (now, t, high)
        if outcome == "bump":
            assert self.reported[reported:] == [clock_sequence + 1]
            clock_sequence, high = clock_sequence + 1, t - 1
        else:
            assert self.reported[reported:] == []
        self.high, self.clock_sequence = high, clock_sequence
        if not ids:
            return

        count = len(self.issued)
        self.issued.update(ids)
        assert len(self.issued) == count + len(ids), "duplicate ID"
        assert all(map(operator.lt, ids, ids[1:])), "batch not strictly increasing"
        if self.policy in ("raise", "wait", "borrow"):
            assert ids[0] > self.last_id
        self.last_id = max(self.last_id, ids[-1])

        shift = layout.time_shift
        units = [value >> shift for value in (min(ids), max(ids))]
        self.high = max(self.high, units[1])
        after = self.clock()
        if self.policy == "borrow":
            assert units[1] >= layout.to_units(after)
            assert layout.unit_start_ms(units[1]) - after <= self.bound
        else:
            assert units[1] == layout.to_units(after), "the last ID is not of the clock's unit"

        workers = {(value >> layout.worker_shift) & layout.max_worker_id for value in ids}
        datacenters = {
            (value >> layout.datacenter_shift) & layout.max_datacenter_id for value in ids
        }
        pairs = {
            (
                (value >> layout.worker_shift) & layout.max_worker_id,
                (value >> layout.clock_sequence_shift) & layout.max_clock_sequence,
            )
            for value in ids
        }
        assert pairs <= self.known
        self.pairs |= pairs
        assert {cs for _, cs in pairs} == {self.clock_sequence}
        if source is None:
            assert workers == {self.worker_id}
            assert datacenters == {self.datacenter_id}
        else:
            lease = self.generator.lease
            assert lease is source.current
            assert workers == {lease.worker_id}
            assert datacenters == {lease.datacenter_id}
            assert units[1] < source.limit
            below = [
                (value >> layout.clock_sequence_shift) & layout.max_clock_sequence
                for value in ids
                if value >> shift <= source.floor
            ]
            if below:
                assert self.policy == "clock_sequence"
                assert min(below) > source.floor_clock_sequence


STEP_RANGES = [
    ("advance", 0, 30),
    ("advance", 31, 5000),
    ("rewind", 1, 25),
    ("rewind", 1, 10_000),
    ("rewind_units", 1, 5),
    ("next_id", 1, 30),
    ("next_ids", 0, 60),
    ("burst", 1, 4),
    ("drop", 0, 1),
    ("extend", 1, 20),
]
STEP = st.one_of(
    [st.tuples(st.just(kind), st.integers(low, high)) for kind, low, high in STEP_RANGES]
)


def random_step(rng: random.Random) -> tuple[str, int]:
    kind, low, high = rng.choice(STEP_RANGES)
    return kind, rng.randint(low, high)


@pytest.fixture(scope="module", autouse=True)
def report_totals(request):
    yield
    line = (
        f"\ntest_generator: {TOTALS['walks']} clock walks issuing {TOTALS['ids']} IDs, "
        f"{TOTALS['thread_ids']} IDs from threads"
    )
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


@pytest.mark.parametrize(("policy", "name"), COMBINATIONS)
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    bound=st.sampled_from(BOUNDS),
    leased=st.booleans(),
    steps=st.lists(STEP, min_size=1, max_size=40),
    data=st.data(),
)
def test_random_walk(policy, name, bound, leased, steps, data):
    layout = ALL_LAYOUTS[name]
    walk = Walk(
        layout,
        policy,
        bound,
        leased=leased,
        worker_id=data.draw(st.integers(0, layout.max_worker_id)),
        datacenter_id=data.draw(st.integers(0, layout.max_datacenter_id)),
        clock_sequence=0 if leased else data.draw(st.integers(0, layout.max_clock_sequence)),
        start_ms=data.draw(st.integers(0, 10**6)),
        chunk=data.draw(st.integers(1, 6)),
        system_ns=data.draw(st.none() | st.integers(0, 999_999)),
    )
    walk.run(steps)


@pytest.mark.parametrize("seed", range(6))
def test_seeded_random_walks(seed):
    rng = random.Random(seed)
    walks = ids = 0
    for _ in range(100):
        policy, name = rng.choice(COMBINATIONS)
        layout = ALL_LAYOUTS[name]
        leased = rng.random() < 0.5
        walk = Walk(
            layout,
            policy,
            rng.choice(BOUNDS),
            leased=leased,
            worker_id=rng.randint(0, layout.max_worker_id),
            datacenter_id=rng.randint(0, layout.max_datacenter_id),
            clock_sequence=0 if leased else rng.randint(0, layout.max_clock_sequence),
            start_ms=rng.randint(0, 10**6),
            chunk=rng.randint(1, 6),
            system_ns=rng.choice([None, 0, rng.randint(1, 999_999)]),
        )
        walk.run([random_step(rng) for _ in range(rng.randint(1, 80))])
        walks += 1
        ids += len(walk.issued)
    print(f"seed {seed}: {walks} walks, {ids} IDs")


def make(layout=None, *, start_ms=DAY_MS, **kwargs):
    layout = layout or LAYOUTS["tiny"]
    clock = FakeClock(layout.epoch_ms + start_ms)
    kwargs.setdefault("worker_id", None if "lease_source" in kwargs else 1)
    generator = SnowflakeGenerator(layout, clock=clock, sleep=clock.sleep, **kwargs)
    return generator, clock


def units_of(layout: BitLayout, ids: list[int]) -> list[int]:
    return [value >> layout.time_shift for value in ids]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("batch", [False, True])
def test_sequence_exhaustion_waits_for_the_next_unit(policy, batch):
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    generator, clock = make(layout, rollback=policy, max_rollback_ms=0)
    start = layout.to_units(clock())
    ids = generator.next_ids(4 * 6) if batch else [generator.next_id() for _ in range(4 * 6)]
    assert units_of(layout, ids) == [start + index // 4 for index in range(24)]
    assert [value & layout.max_sequence for value in ids] == [0, 1, 2, 3] * 6
    assert clock.slept_ms == 5
    assert layout.to_units(clock()) == start + 5


@pytest.mark.parametrize("bound", [0, 3, 10])
def test_borrow_takes_units_ahead_within_its_bound(bound):
    layout = LAYOUTS["tiny"]
    generator, clock = make(layout, rollback="borrow", max_rollback_ms=bound)
    start = clock()
    ids = generator.next_ids(4 * 20)
    for unit in units_of(layout, ids):
        assert layout.unit_start_ms(unit) - start <= bound + clock.slept_ms
    assert units_of(layout, ids[: 4 * (bound + 1)]) == [
        layout.to_units(start) + index // 4 for index in range(4 * (bound + 1))
    ]
    assert clock() - start == 19 - bound


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    ("layout", "offset_ms"),
    [
        (CLOCK_SEQUENCE_LAYOUTS["tiny_cs"], -1),
        (CLOCK_SEQUENCE_LAYOUTS["tiny_cs"], -DAY_MS),
        (CLOCK_SEQUENCE_LAYOUTS["tiny_cs"], 2**30),
        (CLOCK_SEQUENCE_LAYOUTS["baidu_cs"], 2**28 * 1000),
        (BitLayout(time_bits=50, clock_sequence_bits=1, worker_bits=4, sequence_bits=8), -5),
    ],
)
def test_clock_outside_the_lifespan(policy, layout, offset_ms):
    generator, clock = make(layout, start_ms=offset_ms, rollback=policy)
    for call in (generator.next_id, lambda: generator.next_ids(3)):
        with pytest.raises(ClockOutsideLifespan, match=f"The clock reads {clock()} ms"):
            call()


@pytest.mark.parametrize("policy", POLICIES)
def test_the_last_unit_of_the_lifespan_is_used_and_then_generation_stops(policy):
    layout = BitLayout(time_bits=6, clock_sequence_bits=1, worker_bits=2, sequence_bits=2)
    generator, clock = make(layout, start_ms=63, rollback=policy)
    ids = generator.next_ids(4)
    assert units_of(layout, ids) == [63] * 4
    with pytest.raises(ClockOutsideLifespan):
        generator.next_id()
    assert clock() >= layout.unit_start_ms(64)
    with pytest.raises(ClockOutsideLifespan):
        generator.next_ids(1)


class CountingSource:
    """Hands out a lease per call: worker 1, 2, ... with the floor and limit it is given."""

    def __init__(self, floor: int = -1, limit: int | None = None, *, renew_by: int = 10) -> None:
        self.floor, self.limit, self.renew_by = floor, limit, renew_by
        self.leases: list[Lease] = []
        self.highs: list[int] = []
        self.same_slot = False

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        self.highs.append(generator.last_timestamp)
        if self.leases and (self.same_slot or generator.lease is not None):
            previous = self.leases[-1]
            limit = None if previous.limit is None else previous.limit + self.renew_by
            lease = Lease(
                previous.worker_id,
                floor=previous.floor,
                limit=limit,
                clock_sequence=previous.clock_sequence,
            )
        else:
            lease = Lease(len(self.leases) + 1, floor=self.floor, limit=self.limit)
        self.leases.append(lease)
        return lease


def test_lease_first_id_acquires_and_ids_stay_inside_the_lease():
    layout = LAYOUTS["tiny"]
    base = layout.to_units(layout.epoch_ms + DAY_MS)
    source = CountingSource(floor=base - 3, limit=base + 4)
    generator, clock = make(layout, lease_source=source)
    assert source.leases == [] and generator.worker_id is None
    first = generator.next_id()
    assert len(source.leases) == 1 and generator.lease is source.leases[0]
    ids = [first, *generator.next_ids(4 * 4 - 1)]
    assert units_of(layout, ids) == [base + index // 4 for index in range(16)]
    assert len(source.leases) == 1
    more = generator.next_ids(4)
    assert len(source.leases) == 2
    assert generator.lease is source.leases[1] and source.leases[1].limit == base + 14
    assert units_of(layout, more) == [base + 4] * 4
    assert {layout.decompose(value).worker_id for value in ids + more} == {1}
    clock.advance(100)
    with_renewals = generator.next_ids(3)
    assert units_of(layout, with_renewals)[0] < source.leases[-1].limit
    assert len(source.leases) > 2


@pytest.mark.parametrize("batch", [False, True])
def test_borrow_never_borrows_the_lease_limit(batch):
    layout = LAYOUTS["tiny"]
    base = layout.to_units(layout.epoch_ms + DAY_MS)
    source = CountingSource(limit=base + 3)
    generator, clock = make(layout, lease_source=source, rollback="borrow", max_rollback_ms=20)
    ids = generator.next_ids(13) if batch else [generator.next_id() for _ in range(13)]
    assert units_of(layout, ids) == [base + index // 4 for index in range(13)]
    assert source.highs == [-1, base + 2]
    assert clock() == layout.unit_start_ms(base + 3)


def test_revoke_stops_at_once_and_the_next_id_acquires_afresh():
    layout = LAYOUTS["tiny"]
    source = CountingSource()
    generator, _clock = make(layout, lease_source=source)
    first = generator.next_id()
    lease = generator.lease
    generator.revoke(Lease(1))
    assert generator.lease is lease
    generator.revoke(lease)
    assert generator.lease is None and generator.worker_id is None
    second = generator.next_id()
    assert len(source.leases) == 2 and generator.worker_id == 2
    assert layout.decompose(second).worker_id == 2
    assert second > first
    assert units_of(layout, [second]) > units_of(layout, [first])
    assert not generator.extend(lease, 10**9)


def test_relinquish_returns_the_lease_and_high_unit():
    layout = LAYOUTS["tiny"]
    source = CountingSource()
    generator, _clock = make(layout, lease_source=source)
    ids = generator.next_ids(9)
    lease, high = generator.relinquish()
    assert lease is source.leases[0] and high == units_of(layout, ids)[-1]
    assert generator.lease is None
    assert generator.relinquish() == (None, high)
    assert units_of(layout, [generator.next_id()])[0] > high


def test_extend_only_raises_the_limit_of_the_current_lease():
    layout = LAYOUTS["tiny"]
    base = layout.to_units(layout.epoch_ms + DAY_MS)
    source = CountingSource(limit=base + 2)
    generator, clock = make(layout, lease_source=source)
    generator.next_id()
    lease = generator.lease
    assert not generator.extend(Lease(1, limit=base + 100), base + 100)
    assert generator.extend(lease, base + 50)
    assert generator.extend(lease, base + 10)
    clock.advance(40)
    generator.next_id()
    assert len(source.leases) == 1
    clock.advance(10)
    value = generator.next_id()
    assert len(source.leases) > 1
    assert units_of(layout, [value]) == [base + 50]
    assert source.leases[-1].limit > base + 50


def test_lease_with_a_fixed_worker_id_is_validated():
    layout = LAYOUTS["tiny"]
    for lease in (
        Lease(8),
        Lease(-1),
        Lease(True),
        Lease(1, datacenter_id=1),
        Lease(1, clock_sequence=1),
    ):
        source = CountingSource()
        source.acquire = lambda generator, lease=lease: lease
        generator, _clock = make(layout, lease_source=source)
        with pytest.raises(ValueError, match=r"outside 0\.\."):
            generator.next_id()
        assert generator.lease is None


FLOOR_AHEAD_MS = 12


@pytest.mark.parametrize(
    ("policy", "bound", "outcome"),
    [
        ("raise", 1000, "raise"),
        ("wait", 20, "wait"),
        ("wait", 5, "raise"),
        ("borrow", 20, "borrow"),
        ("borrow", 5, "raise"),
        ("ring", 20, "wait"),
        ("ring", 5, "raise"),
        ("clock_sequence", 0, "bump"),
    ],
)
def test_a_floor_ahead_of_the_clock_is_a_rollback(policy, bound, outcome):
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    base = layout.to_units(layout.epoch_ms + DAY_MS)
    floor = base + FLOOR_AHEAD_MS
    source = CountingSource(floor=floor)
    reported = []
    generator, clock = make(
        layout,
        lease_source=source,
        rollback=policy,
        max_rollback_ms=bound,
        on_clock_sequence=lambda value: reported.append((value, clock())),
    )
    if outcome == "raise":
        with pytest.raises(ClockMovedBackwards) as info:
            generator.next_id()
        assert info.value.behind_ms == FLOOR_AHEAD_MS
        assert f"by {FLOOR_AHEAD_MS} ms" in str(info.value)
        return
    value = generator.next_id()
    parts = layout.decompose(value)
    units = units_of(layout, [value])[0]
    if outcome == "bump":
        assert reported == [(1, clock())]
        assert parts.clock_sequence == 1 and units == base
        assert generator.clock_sequence == 1
    else:
        assert reported == []
        assert units == floor + 1 and parts.clock_sequence == 0
        ahead = layout.unit_start_ms(units) - clock()
        assert ahead == (FLOOR_AHEAD_MS + 1 if outcome == "borrow" else 0)
        assert clock.slept_ms == (0 if outcome == "borrow" else FLOOR_AHEAD_MS + 1)


def test_clock_sequence_is_reported_before_any_id_carries_it():
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    seen: list[int] = []
    reported: list[tuple[int, set[int]]] = []
    generator, clock = make(
        layout,
        rollback="clock_sequence",
        max_rollback_ms=3,
        on_clock_sequence=lambda value: reported.append(
            (value, {layout.decompose(v).clock_sequence for v in seen})
        ),
    )
    seen += generator.next_ids(5)
    for expected in (1, 2, 3):
        clock.rewind(50)
        seen.append(generator.next_id())
        assert reported[-1] == (expected, set(range(expected)))
        assert layout.decompose(seen[-1]).clock_sequence == expected
        assert generator.clock_sequence == expected
        seen += generator.next_ids(6)
    assert len(set(seen)) == len(seen)
    clock.rewind(3)
    seen.append(generator.next_id())
    assert len(reported) == 3
    assert clock.slept_ms > 0
    clock.rewind(4)
    with pytest.raises(ClockMovedBackwards, match="'clock_sequence' rollback policy"):
        generator.next_id()
    assert len(reported) == 3 and len(set(seen)) == len(seen)


def test_failing_clock_sequence_callback_issues_nothing():
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    fail = [True]
    reported: list[int] = []

    def on_clock_sequence(value: int) -> None:
        if fail[0]:
            raise OSError("database down")
        reported.append(value)

    generator, clock = make(layout, rollback="clock_sequence", on_clock_sequence=on_clock_sequence)
    first = generator.next_ids(3)
    clock.rewind(100)
    for call in (generator.next_id, lambda: generator.next_ids(4)):
        with pytest.raises(OSError, match="database down"):
            call()
    assert generator.clock_sequence == 0
    fail[0] = False
    later = generator.next_id()
    assert reported == [1] and layout.decompose(later).clock_sequence == 1
    assert later not in first


@pytest.mark.parametrize(("error", "acquires"), [(OSError, 1), (WorkerLeaseLost, 3)])
def test_failing_callback_on_a_floor_ahead_issues_nothing(error, acquires):
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    base = layout.to_units(layout.epoch_ms + DAY_MS)
    source = CountingSource(floor=base + 30)
    source.same_slot = True

    def on_clock_sequence(value: int) -> None:
        raise error("cannot store the clock sequence")

    generator, clock = make(
        layout, lease_source=source, rollback="clock_sequence", on_clock_sequence=on_clock_sequence
    )
    for call in (generator.next_id, lambda: generator.next_ids(2)):
        with pytest.raises(error):
            call()
        assert (generator.lease is None) is (error is WorkerLeaseLost)
        assert generator.clock_sequence == 0
    clock.advance(31)
    value = generator.next_id()
    assert layout.decompose(value).clock_sequence == 0
    assert units_of(layout, [value])[0] == base + 31
    assert len(source.leases) == acquires


def test_clock_sequence_continues_from_the_given_value():
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    reported: list[int] = []
    generator, clock = make(
        layout, rollback="clock_sequence", clock_sequence=2, on_clock_sequence=reported.append
    )
    first = generator.next_id()
    assert layout.decompose(first).clock_sequence == 2
    clock.rewind(10)
    assert layout.decompose(generator.next_id()).clock_sequence == 3
    assert reported == [3]


@pytest.mark.parametrize("system", [False, True])
def test_ring_continues_each_units_sequence(system):
    layout = LAYOUTS["tiny"]
    clock = FakeClock(layout.epoch_ms + DAY_MS)
    patch = mock.patch.object(generator_module, "time", SystemTime(clock, 123_456))
    with patch if system else nullcontext():
        generator = SnowflakeGenerator(
            layout,
            1,
            clock=None if system else clock,
            sleep=clock.sleep,
            rollback="ring",
            max_rollback_ms=5,
        )
        base = clock()
        start = layout.to_units(base)
        issued: list[int] = []
        for at, count, batch, expected in [
            (0, 2, False, [(0, 0), (0, 1)]),
            (3, 1, False, [(3, 0)]),
            (0, 1, False, [(0, 2)]),
            (1, 1, False, [(1, 0)]),
            (3, 1, False, [(3, 1)]),
            (4, 1, False, [(4, 0)]),
            (1, 1, False, [(1, 1)]),
            (0, 3, True, [(0, 3), (1, 2), (1, 3)]),
            (2, 5, False, [(2, 0), (2, 1), (2, 2), (2, 3), (3, 2)]),
            (-1, 2, True, [(-1, 0), (-1, 1)]),
            (5, 2, False, [(5, 0), (5, 1)]),
            (0, 1, True, [(3, 3)]),
        ]:
            clock.ms = base + at
            ids = (
                generator.next_ids(count) if batch else [generator.next_id() for _ in range(count)]
            )
            parts = [layout.decompose(value) for value in ids]
            assert [(units_of(layout, [p.id])[0] - start, p.sequence) for p in parts] == expected
            issued += ids
        assert len(set(issued)) == len(issued)
        assert clock() == base + 3
        clock.ms = base - 1
        with pytest.raises(ClockMovedBackwards, match="by 6 ms"):
            generator.next_id()


class SteppingBackClock(FakeClock):
    """A FakeClock whose first sleep steps back ``back_ms`` instead of forward."""

    def __init__(self, start_ms: int, back_ms: int) -> None:
        super().__init__(start_ms)
        self.back_ms = back_ms

    def sleep(self, seconds: float) -> None:
        if self.back_ms:
            self.rewind(self.back_ms)
            self.back_ms = 0
        else:
            super().sleep(seconds)


@pytest.mark.parametrize(
    ("policy", "back_ms", "reordered"),
    [
        ("raise", 3, None),
        ("wait", 3, False),
        ("borrow", 3, False),
        ("ring", 3, True),
        ("clock_sequence", 50, True),
    ],
)
def test_batches_stay_sorted_when_the_clock_steps_back_mid_batch(policy, back_ms, reordered):
    layout = CLOCK_SEQUENCE_LAYOUTS["tiny_cs"]
    clock = SteppingBackClock(layout.epoch_ms + DAY_MS, back_ms)
    generator = SnowflakeGenerator(
        layout, 1, clock=clock, sleep=clock.sleep, rollback=policy, max_rollback_ms=5
    )
    start = layout.to_units(clock())
    if reordered is None:
        with pytest.raises(ClockMovedBackwards):
            generator.next_ids(12)
        return
    ids = generator.next_ids(12)
    assert all(map(operator.lt, ids, ids[1:]))
    assert (min(units_of(layout, ids)) < start) is reordered
    assert len(set(ids) | set(generator.next_ids(12))) == 24


def run_threads(
    generator: SnowflakeGenerator, count: int, work: Callable[[int], list[int]]
) -> list[list[int]]:
    barrier = threading.Barrier(count)
    results: list[list[int]] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    every = [value for ids in results for value in ids]
    assert len(set(every)) == len(every), "duplicate ID across threads"
    for ids in results:
        assert all(map(operator.lt, ids, ids[1:])), "a thread's IDs are not increasing"
    layout = generator.layout
    assert {(value >> layout.worker_shift) & layout.max_worker_id for value in every} == {
        generator.worker_id
    }
    TOTALS["thread_ids"] += len(every)
    return results


def test_threads_share_one_generator():
    generator = SnowflakeGenerator(LAYOUTS["twitter"], 7)
    results = run_threads(generator, 8, lambda index: [generator.next_id() for _ in range(50_000)])
    assert sum(map(len, results)) == 400_000


def test_threads_mix_next_id_and_next_ids():
    generator = SnowflakeGenerator(LAYOUTS["twitter"], 1023)

    def work(index: int) -> list[int]:
        rng = random.Random(index)
        ids: list[int] = []
        while len(ids) < 30_000:
            if rng.random() < 0.5:
                ids.append(generator.next_id())
            else:
                ids += generator.next_ids(rng.randint(0, 5000))
        return ids

    run_threads(generator, 4, work)


@pytest.fixture
def constant_preemption() -> Iterator[None]:
    """Switch threads every microsecond: the lock-free path is preempted at every step."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


class PreemptedRange:
    """A range iterator that lets other threads run before each take, as if the taker were
    preempted between loading the window's iterator and calling next() on it."""

    def __init__(self, start: int, stop: int) -> None:
        self._ids = iter(builtins.range(start, stop))

    def __iter__(self) -> PreemptedRange:
        return self

    def __next__(self) -> int:
        time.sleep(0)
        return next(self._ids)

    def __length_hint__(self) -> int:
        return operator.length_hint(self._ids)


@pytest.mark.parametrize("entry", ["next_id", "generate"])
@pytest.mark.parametrize("preempted", [False, True])
def test_lock_free_path_under_preemption_and_disarms(
    constant_preemption, monkeypatch, entry, preempted
):
    # Three threads on the lock-free path while a fourth keeps closing its window (batches,
    # clock swaps, which fold the iterator back under the lock) and taking the slow path.
    count = 40_000
    if preempted:
        monkeypatch.setattr(generator_module, "range", PreemptedRange, raising=False)
        count = 1_500  # every take yields the GIL: slow
    generator = SnowflakeGenerator(LAYOUTS["twitter"], 3)
    if entry == "generate":
        monkeypatch.setattr(runtime, "_generator", generator)
        monkeypatch.setattr(django_snowflake, "_runtime", runtime)
        take = django_snowflake.generate
    else:
        take = generator.next_id
    done = threading.Event()

    def work(index: int) -> list[int]:
        if index < 3:
            ids = [take() for _ in range(count)]
            done.set()
            return ids
        rng = random.Random(index)
        ids = []
        while not done.is_set():
            ids += generator.next_ids(rng.randint(1, 40))
            generator.use_clock(system_clock, precise_sleep)
            ids.append(take())
        return ids

    results = run_threads(generator, 4, work)
    assert sum(map(len, results[:3])) == 3 * count and results[3]


def in_child(work: Callable[[], dict]) -> tuple[int, dict]:
    """Run ``work`` in a forked child; return its exit code and the JSON it wrote."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            signal.alarm(20)
            os.write(write, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), json.loads(output or b"{}")


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")


@needs_fork
def test_fork_child_must_not_reuse_a_fixed_worker_id():
    clock = FakeClock()
    with mock.patch.object(generator_module, "time", SystemTime(clock, 0)):
        generator = SnowflakeGenerator(LAYOUTS["twitter"], 5, sleep=clock.sleep)
        before = generator.next_id()

        def work() -> dict:
            errors = []
            for call in (generator.next_id, lambda: generator.next_ids(2)):
                try:
                    return {"id": call()}
                except WorkerLeaseLost as exc:
                    errors.append(str(exc))
            return {"errors": errors}

        code, result = in_child(work)
        assert generator.next_id() == before + 1
    assert code == 0
    assert len(result.get("errors", [])) == 2, result
    assert f"process {os.getpid()}" in result["errors"][0]
    assert generator.worker_id == 5


@needs_fork
def test_fork_child_acquires_its_own_lease():
    layout = LAYOUTS["twitter"]
    source = CountingSource()
    generator = SnowflakeGenerator(layout, lease_source=source)
    parent_id = generator.next_id()
    inside = threading.Event()
    release = threading.Event()
    holder = threading.get_ident()

    def clock() -> int:
        if threading.get_ident() == holder:
            inside.set()
            release.wait(10)
        return system_ms()

    def hold_the_lock() -> None:
        nonlocal holder
        holder = threading.get_ident()
        generator.next_id()

    generator.use_clock(clock, lambda seconds: None)
    thread = threading.Thread(target=hold_the_lock)
    thread.start()
    assert inside.wait(10)

    def work() -> dict:
        value = generator.next_id()
        return {"id": value, "acquires": len(source.leases), "worker": generator.worker_id}

    try:
        code, result = in_child(work)
    finally:
        release.set()
        thread.join()
    assert code == 0, result
    assert result["acquires"] == 2 and result["worker"] == 2
    assert layout.decompose(result["id"]).worker_id == 2
    assert len(source.leases) == 1 and generator.worker_id == 1
    assert generator.next_id() > parent_id


def system_ms() -> int:
    from django_snowflake.generator import system_clock

    return system_clock()


@pytest.mark.parametrize(
    ("layout", "args", "kwargs", "message"),
    [
        (LAYOUTS["twitter"], (1,), {"rollback": "retry"}, "Unknown rollback policy 'retry'"),
        (LAYOUTS["twitter"], (1,), {"rollback": "clock_sequence"}, "clock_sequence_bits"),
        (LAYOUTS["twitter"], (1,), {"max_rollback_ms": -1}, "got -1"),
        (LAYOUTS["twitter"], (1,), {"max_rollback_ms": 1.5}, "got 1.5"),
        (LAYOUTS["twitter"], (1,), {"max_rollback_ms": True}, "got True"),
        (
            LAYOUTS["twitter"],
            (1,),
            {"lease_source": CountingSource()},
            "exactly one of worker_id and lease_source",
        ),
        (LAYOUTS["twitter"], (), {}, "exactly one of worker_id and lease_source"),
        (LAYOUTS["twitter"], (1024,), {}, "worker_id 1024 is outside 0..1023"),
        (LAYOUTS["twitter"], (-1,), {}, "worker_id -1 is outside 0..1023"),
        (LAYOUTS["twitter"], (True,), {}, "worker_id True"),
        (LAYOUTS["twitter"], ("1",), {}, "worker_id '1'"),
        (LAYOUTS["twitter"], (1,), {"datacenter_id": 1}, "datacenter_id 1 is outside 0..0"),
        (LAYOUTS["tiny_10ms"], (1,), {"datacenter_id": 2}, "datacenter_id 2 is outside 0..1"),
        (LAYOUTS["twitter"], (1,), {"clock_sequence": 1}, "clock_sequence 1 is outside 0..0"),
        (
            CLOCK_SEQUENCE_LAYOUTS["tiny_cs"],
            (1,),
            {"clock_sequence": 4},
            "clock_sequence 4 is outside 0..3",
        ),
    ],
)
def test_invalid_constructor_arguments(layout, args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        SnowflakeGenerator(layout, *args, **kwargs)


def test_next_ids_rejects_a_negative_count():
    generator, _clock = make()
    with pytest.raises(ValueError, match="got -1"):
        generator.next_ids(-1)
    assert generator.next_ids(0) == []


def test_clock_moved_backwards_is_a_snowflake_error_with_the_numbers():
    generator, clock = make(rollback="wait", max_rollback_ms=5)
    generator.next_id()
    clock.rewind(9)
    with pytest.raises(ClockMovedBackwards) as info:
        generator.next_id()
    assert isinstance(info.value, SnowflakeError)
    assert (info.value.behind_ms, info.value.policy, info.value.max_rollback_ms) == (9, "wait", 5)
    assert "by 9 ms" in str(info.value) and "MAX_ROLLBACK_MS = 5" in str(info.value)
