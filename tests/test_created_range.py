"""``created_after``/``created_before``/``created_between`` at every time-unit size.

An ID records its creation time only to its unit, so the filters must never return a row
that may lie on the wrong side of a bound (DESIGN section 2: after is ``t >= dt``, before is
``t < dt``), and must return every row whose whole unit lies on the right side.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_snowflake.conf import get_layout
from django_snowflake.layout import BitLayout
from tests.factories import CustomerFactory
from tests.testapp.models import Order

# Units of 1 ms, 10 ms and 1 s.
PRESETS = ["twitter", "sonyflake", "baidu"]
BASE = datetime(2026, 3, 1, 12, tzinfo=UTC)
US = timedelta(microseconds=1)


def unit_us(layout: BitLayout) -> int:
    return layout.time_unit_ms * 1000


def unit_bounds(layout: BitLayout, created: datetime) -> tuple[datetime, datetime]:
    """The start and end of the unit an ID made at ``created`` carries."""
    ms = (created - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    start_ms = layout.unit_start_ms(layout.to_units(ms))
    start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=start_ms)
    return start, start + timedelta(milliseconds=layout.time_unit_ms)


@pytest.fixture(params=PRESETS)
def layout(request: pytest.FixtureRequest) -> Iterator[BitLayout]:
    snowflake = {"LAYOUT": request.param, "WORKER_ALLOCATOR": "static", "WORKER_ID": 0}
    with override_settings(SNOWFLAKE=snowflake):
        yield get_layout()


# Creation times and bounds within four units of BASE, to the microsecond.
offsets = st.integers(min_value=0, max_value=4_000_000)


@pytest.mark.django_db
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    created=st.lists(offsets, min_size=1, max_size=8),
    start=offsets,
    end=offsets,
    scale=st.sampled_from([1, 1000]),
)
def test_filters_keep_to_their_side_of_the_bounds(
    layout: BitLayout, created: list[int], start: int, end: int, scale: int
) -> None:
    # ``scale`` 1000 spreads the times over four seconds, so 1 s units see whole units too.
    span = unit_us(layout) * 4
    times = [BASE + (offset * scale % span) * US for offset in created]
    low, high = (BASE + (bound * scale % span) * US for bound in (start, end))
    Order.objects.all().delete()
    customer = CustomerFactory()
    rows = {}
    for sequence, moment in enumerate(times):
        units = layout.to_units((moment - datetime(1970, 1, 1, tzinfo=UTC)) // (1000 * US))
        order = Order.objects.create(
            id=layout.compose(units, worker_id=layout.max_worker_id, sequence=sequence),
            customer=customer,
        )
        rows[order.pk] = (moment, *unit_bounds(layout, moment))

    after = set(Order.objects.created_after(low).values_list("pk", flat=True))
    before = set(Order.objects.created_before(high).values_list("pk", flat=True))
    between = set(Order.objects.created_between(low, high).values_list("pk", flat=True))
    for pk, (moment, unit_start, unit_end) in rows.items():
        # Never a row from the wrong side of the bound...
        if pk in after:
            assert moment >= low
        if pk in before:
            assert moment < high
        # ...and every row whose whole unit is on the right side.
        assert (pk in after) == (unit_start >= low)
        assert (pk in before) == (unit_end <= high)
        assert (pk in between) == (pk in after and pk in before)


@settings(max_examples=500, deadline=None)
@given(
    unit=st.sampled_from([1, 7, 10, 1000]),
    epoch_ms=st.integers(min_value=1_700_000_000_000, max_value=1_800_000_000_000),
    offset_us=st.integers(min_value=-10_000_000, max_value=10**12),
)
def test_min_id_from_is_the_first_whole_unit_at_or_after(
    unit: int, epoch_ms: int, offset_us: int
) -> None:
    layout = BitLayout(time_unit_ms=unit, epoch=epoch_ms)
    dt = layout.epoch_datetime + offset_us * US
    first = layout.min_id_from(dt)
    units = first >> layout.time_shift
    start = layout.epoch_datetime + timedelta(milliseconds=units * unit)
    if offset_us <= 0:
        assert first == 0
    else:
        # The unit starts at or after dt, and the unit before it starts before dt.
        assert start >= dt > start - timedelta(milliseconds=unit)
    # On a unit boundary, it is min_id_for; inside a unit, the next unit's first ID.
    on_boundary = offset_us >= 0 and offset_us % (unit * 1000) == 0
    assert (first == layout.min_id_for(dt)) == (on_boundary or offset_us < 0)


def test_a_bound_inside_a_baidu_second_leaves_that_seconds_rows_out() -> None:
    # The case: with 1 s units, rounding down returned rows up to a second early.
    layout = BitLayout.preset("baidu")
    second = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)
    inside = second + timedelta(milliseconds=500)
    assert layout.min_id_from(inside) == layout.min_id_for(second + timedelta(seconds=1))
    assert layout.min_id_from(second) == layout.min_id_for(second)
