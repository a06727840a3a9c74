"""The generator against its model (tests/model_checker.py): random clock walks on every
policy and layout, drawn by hypothesis and from fixed seeds."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .generators import ALL_LAYOUTS, write_summary
from .model_checker import BOUNDS, COMBINATIONS, STEP, TOTALS, Walk, random_step


@pytest.fixture(scope="module", autouse=True)
def report_totals(request):
    yield
    line = f"\ntest_model_check: {TOTALS['walks']} clock walks issuing {TOTALS['ids']} IDs"
    write_summary(request, line)


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
