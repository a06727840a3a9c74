"""The generator on a lease source: the first ID acquires, IDs stay inside the lease, and
``revoke``, ``relinquish`` and ``extend`` (the allocator's side of the protocol, without a
database; the database allocator itself is in test_worker_lease.py)."""

from __future__ import annotations

import dataclasses

import pytest

from django_snowflake.exceptions import ClockMovedBackwards
from django_snowflake.generator import Lease

from .generators import DAY_MS, LAYOUTS, CountingSource, make, units_of


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


class SkippedSource:
    """One slot whose floor lies ahead of the clock, skipped to (``Lease.ahead``), as the
    database allocator hands it out after a failover; each renewal raises the limit."""

    def __init__(self, lease: Lease) -> None:
        self.leases = [lease]

    def acquire(self, generator):
        if generator.lease is not None or len(self.leases) > 1:
            previous = self.leases[-1]
            self.leases.append(dataclasses.replace(previous, limit=previous.limit + 50))
        return self.leases[-1]


def skipped(floor_ahead: int, bound_ahead: int, *, rollback: str = "raise"):
    """A generator on a skipped lease: its floor ``floor_ahead`` units ahead of the clock, its
    keys bound to ``bound_ahead`` units ahead of the monotonic time (the FakeClock's sleeps:
    stepping the wall clock with advance() does not move it)."""
    layout = LAYOUTS["tiny"]
    generator, clock = make(layout, lease_source=SkippedSource(Lease(0)), rollback=rollback)
    now = layout.to_units(clock())
    lease = Lease(
        1, floor=now + floor_ahead, limit=now + floor_ahead + 40, ahead=(now + bound_ahead, 0)
    )
    generator.lease_source = SkippedSource(lease)
    generator._monotonic_ns = lambda: clock.slept_ms * 1_000_000
    return generator, clock, layout, now


def test_a_skipped_lease_issues_above_its_floor_at_once():
    generator, clock, layout, now = skipped(1000, 1003)
    first = generator.next_id()
    assert units_of(layout, [first]) == [now + 1001] and clock.slept_ms == 0


def test_a_skipped_lease_runs_ahead_no_faster_than_the_monotonic_clock():
    """Its keys never run further ahead of the time they are issued than the bound was when
    the lease was taken: that is what a later failover's floor relies on."""
    generator, clock, layout, now = skipped(1000, 1003)
    issued = []
    for _ in range(200):
        value = generator.next_id()
        unit = units_of(layout, [value])[0]
        assert unit < now + 1003 + clock.slept_ms, (unit, clock.slept_ms)
        issued.append(value)
    assert issued == sorted(issued) and len(set(issued)) == 200
    assert clock.slept_ms > 0  # 4 IDs a unit: it waited for the bound, not for the clock
    assert generator.waits["sequence"][0] > 0


def test_a_wall_clock_stepped_back_during_a_skip_neither_raises_nor_stretches_the_bound():
    generator, clock, layout, now = skipped(1000, 1003, rollback="raise")
    before = generator.next_ids(8)
    clock.rewind(500)  # under "raise", outside a skip this is ClockMovedBackwards
    after = generator.next_ids(8)
    assert before + after == sorted(before + after)
    clock.advance(800)  # a step forward, still behind the floor: the bound does not move
    ahead = generator.next_ids(40)
    assert max(units_of(layout, ahead)) < now + 1003 + clock.slept_ms + 1


def test_once_the_clock_passes_the_skip_the_rollback_policy_applies_again():
    generator, clock, layout, _ = skipped(20, 23, rollback="raise")
    generator.next_id()
    clock.advance(30)
    value = generator.next_id()
    assert units_of(layout, [value])[0] == layout.to_units(clock())  # at the clock again
    clock.rewind(10)
    with pytest.raises(ClockMovedBackwards):
        generator.next_id()
