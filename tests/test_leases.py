"""The generator on a lease source: the first ID acquires, IDs stay inside the lease, and
``revoke``, ``relinquish`` and ``extend`` (the allocator's side of the protocol, without a
database; the database allocator itself is in test_worker_lease.py)."""

from __future__ import annotations

import pytest

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
