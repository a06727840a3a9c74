from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from django_snowflake import decode, get_generator
from django_snowflake.layout import ms_to_datetime
from django_snowflake.testing import FakeClock
from tests.factories import OrderFactory, TagFactory
from tests.testapp.models import Event, Order, Tag

pytestmark = pytest.mark.django_db


def test_created_at_is_the_aware_time_in_the_key(snowflake_clock: FakeClock) -> None:
    order = OrderFactory()
    assert order.created_at == ms_to_datetime(snowflake_clock.ms)
    assert order.created_at.tzinfo is UTC
    assert Order.objects.get(pk=order.pk).created_at == order.created_at


@pytest.fixture
def three_seconds(snowflake_clock: FakeClock) -> tuple[list[datetime], list[Order]]:
    """Orders (keys made in Python, so the fake clock drives them) created one second apart; their times, on millisecond boundaries."""
    snowflake_clock.ms -= snowflake_clock.ms % 1000 - 1000  # the start of the next second
    times, events = [], []
    for _ in range(3):
        times.append(ms_to_datetime(snowflake_clock.ms))
        events.append(OrderFactory())
        snowflake_clock.advance(1000)
    return times, events


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (lambda qs, t: qs.created_after(t[1]), [1, 2]),
        # Inside a unit: its rows may be older than the bound, so they are left out.
        (lambda qs, t: qs.created_after(t[1] + timedelta(microseconds=999)), [2]),
        (lambda qs, t: qs.created_after(t[1] + timedelta(milliseconds=1)), [2]),
        (lambda qs, t: qs.created_before(t[1]), [0]),
        (lambda qs, t: qs.created_before(t[1] + timedelta(milliseconds=1)), [0, 1]),
        (lambda qs, t: qs.created_between(t[0], t[2]), [0, 1]),
        (lambda qs, t: qs.created_between(t[1], t[1]), []),
        (
            lambda qs, t: qs.created_between(t[0] - timedelta(days=1), t[2] + timedelta(days=1)),
            [0, 1, 2],
        ),
        (lambda qs, t: qs.created_after(t[0]).created_before(t[2]).order_by("-pk"), [1, 0]),
    ],
)
def test_time_filters(three_seconds: tuple[list[datetime], list[Order]], query, expected) -> None:
    times, events = three_seconds
    result = list(query(Order.objects.order_by("pk"), times))
    assert result == [events[i] for i in expected]


def test_created_after_and_before_split_every_row(three_seconds) -> None:
    times, events = three_seconds
    for moment in [times[1], times[2]]:
        after = set(Order.objects.created_after(moment))
        before = set(Order.objects.created_before(moment))
        assert after.isdisjoint(before) and after | before == set(events)
    # Inside a unit, that unit's row might lie on either side: neither filter returns it.
    inside = times[1] + timedelta(microseconds=500)
    assert set(Order.objects.created_after(inside)) == {events[2]}
    assert set(Order.objects.created_before(inside)) == {events[0]}


def test_naive_datetimes_are_read_in_the_current_time_zone(three_seconds) -> None:
    times, events = three_seconds
    zone = ZoneInfo("America/New_York")
    naive = times[1].astimezone(zone).replace(tzinfo=None)
    with timezone.override(zone):
        assert list(Order.objects.created_after(naive).order_by("pk")) == events[1:]
        assert list(Order.objects.created_before(naive)) == events[:1]


def test_manager_mixin_on_a_custom_manager(snowflake_clock: FakeClock) -> None:
    # Tag's key is SnowflakeAutoField's, made by the database on PostgreSQL and MariaDB on a
    # clock of its own: the keys are given, from the generator the fake clock drives.
    old = TagFactory(id=get_generator().next_id())
    snowflake_clock.advance(5)
    new = TagFactory(id=get_generator().next_id())
    boundary = decode(new.pk).timestamp
    assert list(Tag.objects.created_after(boundary)) == [new]
    assert list(Tag.objects.created_before(boundary)) == [old]


def test_snowflake_clock_moves_ids_with_it(snowflake_clock: FakeClock) -> None:
    first = get_generator().next_id()
    snowflake_clock.advance(86_400_000)
    later = decode(get_generator().next_id()).timestamp
    assert later - decode(first).timestamp == timedelta(days=1)


def test_the_real_clock_is_back_after_a_test_moved_time_forward() -> None:
    # Runs after the test above: the generator must issue IDs at the real time again.
    assert abs(decode(get_generator().next_id()).timestamp - timezone.now()) < timedelta(seconds=5)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN output is PostgreSQL's")
def test_time_filters_use_the_primary_key_index() -> None:
    layout = get_generator().layout
    start = timezone.now() - timedelta(days=30)
    # 20,000 events spread over 30 days, about one every two minutes.
    step = timedelta(days=30) / 20_000
    Event.objects.bulk_create(
        Event(pk=layout.compose(layout.to_units(int((start + i * step).timestamp() * 1000))))
        for i in range(20_000)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Event._meta.db_table}")
    day = start + timedelta(days=10)
    for queryset in [
        Event.objects.created_between(day, day + timedelta(days=1)),
        Event.objects.created_after(timezone.now() - timedelta(hours=1)),
        Event.objects.created_before(start + timedelta(hours=1)),
    ]:
        plan = queryset.explain()
        assert "Index" in plan, plan
        assert "Seq Scan" not in plan, plan
