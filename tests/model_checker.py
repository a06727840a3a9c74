"""The model checker of the generator: a model of what every ID must be, and random walks.

``Walk`` drives one generator on a FakeClock through steps (advance, rewind, issue one,
a batch, a burst past a unit's sequence, drop or extend the lease) and checks every ID it
issues against the model: no duplicate, batches strictly increasing, the clock's unit (or
within the bound under ``borrow``), the right worker, datacenter and clock sequence, inside
the lease, and a clock sequence reported before any ID carries it. ``FakeSource`` is the
lease source of leased walks. test_model_check.py runs the walks, from hypothesis and
from seeds.
"""

from __future__ import annotations

import operator
import random
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from unittest import mock

from hypothesis import strategies as st

from django_snowflake import generator as generator_module
from django_snowflake.exceptions import ClockMovedBackwards
from django_snowflake.generator import POLICIES, Lease, SnowflakeGenerator
from django_snowflake.layout import BitLayout
from django_snowflake.testing import FakeClock

from .generators import ALL_LAYOUTS, CLOCK_SEQUENCE_LAYOUTS, DAY_MS, SystemTime

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
