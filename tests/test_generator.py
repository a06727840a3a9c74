"""The generator's contract: its arguments, sequences that run out, the lifespan, its errors.

Rollback policies are in test_policies.py, lease sources in test_leases.py, threads and
forks in test_concurrency.py, the model checker's random walks in test_model_check.py.
"""

from __future__ import annotations

import pytest

from django_snowflake.exceptions import ClockMovedBackwards, ClockOutsideLifespan, SnowflakeError
from django_snowflake.generator import POLICIES, SnowflakeGenerator
from django_snowflake.layout import BitLayout

from .generators import CLOCK_SEQUENCE_LAYOUTS, DAY_MS, LAYOUTS, CountingSource, make, units_of


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
