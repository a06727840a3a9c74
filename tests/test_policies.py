"""The rollback policies: what the generator does when the clock is behind its last unit.

``raise``, ``wait``, ``borrow`` (units ahead, within MAX_ROLLBACK_MS), ``ring`` (a unit's
sequence continued) and ``clock_sequence`` (a new clock sequence, reported before any ID
carries it), on a clock that steps back and on a lease whose floor is ahead of the clock.
"""

from __future__ import annotations

import operator
from contextlib import nullcontext
from unittest import mock

import pytest

from django_snowflake import generator as generator_module
from django_snowflake.exceptions import ClockMovedBackwards, WorkerLeaseLost
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.testing import FakeClock

from .generators import (
    CLOCK_SEQUENCE_LAYOUTS,
    DAY_MS,
    LAYOUTS,
    CountingSource,
    SystemTime,
    make,
    units_of,
)
from .rollbacks import rollback_outcomes


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


FLOOR_AHEAD_MS = 12


# The floor is FLOOR_AHEAD_MS ahead: within a bound of 20 ms, past one of 5 ms.
@pytest.mark.parametrize(("policy", "bound", "outcome"), rollback_outcomes(within=20, beyond=5))
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
    if outcome == "raises":
        with pytest.raises(ClockMovedBackwards) as info:
            generator.next_id()
        assert info.value.behind_ms == FLOOR_AHEAD_MS
        assert f"by {FLOOR_AHEAD_MS} ms" in str(info.value)
        return
    value = generator.next_id()
    parts = layout.decompose(value)
    units = units_of(layout, [value])[0]
    if outcome == "new clock sequence":
        assert reported == [(1, clock())]
        assert parts.clock_sequence == 1 and units == base
        assert generator.clock_sequence == 1
    else:
        assert reported == []
        assert units == floor + 1 and parts.clock_sequence == 0
        ahead = layout.unit_start_ms(units) - clock()
        assert ahead == (FLOOR_AHEAD_MS + 1 if outcome == "borrows" else 0)
        assert clock.slept_ms == (0 if outcome == "borrows" else FLOOR_AHEAD_MS + 1)


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
        if error is WorkerLeaseLost:
            raise WorkerLeaseLost(WorkerLeaseLost.TAKEN_OVER, worker_id=0, clock_sequence=value)
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
