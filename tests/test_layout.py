from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_snowflake.exceptions import InvalidSnowflake, SnowflakeError
from django_snowflake.layout import BIT_FIELDS, MAX_BITS, BitLayout, SnowflakeParts

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
EPOCH_MS = 1_735_689_600_000
# datetime stops at year 9999: layouts with 48+ time bits of 1 ms reach past it.
LAST_DATETIME_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - EPOCH) // timedelta(
    milliseconds=1
) + EPOCH_MS


@st.composite
def layouts(draw: st.DrawFn, *, max_total: int = MAX_BITS) -> BitLayout:
    """Random valid layouts: any split of at most 63 bits with at least one time bit."""
    budget = draw(st.integers(1, max_total))
    time_bits = draw(st.integers(1, budget))
    rest = budget - time_bits
    bits = {"time_bits": time_bits}
    for name in BIT_FIELDS[1:]:
        bits[name] = draw(st.integers(0, rest))
        rest -= bits[name]
    unit = draw(st.sampled_from([1, 2, 7, 10, 1000, 60_000]))
    epoch = draw(st.integers(0, 4_102_444_800_000))
    return BitLayout(**bits, time_unit_ms=unit, epoch=epoch)


def representable_max_time(layout: BitLayout) -> int:
    return min(layout.max_time, (LAST_DATETIME_MS - layout.epoch_ms) // layout.time_unit_ms)


@st.composite
def layouts_with_fields(draw: st.DrawFn) -> tuple[BitLayout, dict[str, int]]:
    layout = draw(layouts().filter(lambda layout: representable_max_time(layout) >= 0))
    fields = {
        "timestamp": draw(st.integers(0, representable_max_time(layout))),
        "datacenter_id": draw(st.integers(0, layout.max_datacenter_id)),
        "clock_sequence": draw(st.integers(0, layout.max_clock_sequence)),
        "worker_id": draw(st.integers(0, layout.max_worker_id)),
        "sequence": draw(st.integers(0, layout.max_sequence)),
    }
    return layout, fields


@pytest.mark.parametrize(
    ("name", "time_bits", "worker_bits", "sequence_bits", "unit_ms", "max_id"),
    [
        ("twitter", 41, 10, 12, 1, 2**63 - 1),
        ("sonyflake", 39, 16, 8, 10, 2**63 - 1),
        ("baidu", 28, 22, 13, 1000, 2**63 - 1),
        ("js_safe", 41, 6, 6, 1, 2**53 - 1),
    ],
)
def test_presets(name, time_bits, worker_bits, sequence_bits, unit_ms, max_id):
    layout = BitLayout.preset(name)
    assert (layout.time_bits, layout.worker_bits, layout.sequence_bits) == (
        time_bits,
        worker_bits,
        sequence_bits,
    )
    assert (layout.datacenter_bits, layout.clock_sequence_bits) == (0, 0)
    assert layout.time_unit_ms == unit_ms
    assert layout.epoch_ms == EPOCH_MS
    assert layout.max_id == max_id
    last = layout.compose(
        layout.max_time, worker_id=layout.max_worker_id, sequence=layout.max_sequence
    )
    assert last == max_id


def test_js_safe_ids_stay_below_2_53():
    layout = BitLayout.preset("js_safe")
    assert layout.max_id < 2**53
    assert layout.min_id_for(datetime(9999, 1, 1, tzinfo=UTC)) == 2**53
    with pytest.raises(ValueError, match="timestamp"):
        layout.compose(layout.max_time + 1)


def test_preset_epoch_and_unknown_name():
    assert BitLayout.preset("twitter", epoch=0).epoch_ms == 0
    assert BitLayout.preset("twitter") == BitLayout()
    with pytest.raises(ValueError, match=r"'flickr'.*twitter, sonyflake, baidu, js_safe"):
        BitLayout.preset("flickr")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"time_bits": 64}, r"64 \+ 0 \+ 0 \+ 10 \+ 12 = 86 bits; at most 63"),
        ({"time_bits": 42}, r"42 \+ 0 \+ 0 \+ 10 \+ 12 = 64 bits; at most 63"),
        ({"sequence_bits": 63}, "= 114 bits"),
        ({"datacenter_bits": 1}, "= 64 bits"),
        ({"worker_bits": -1}, "worker_bits must be a non-negative integer, got -1"),
        ({"time_bits": -3}, "time_bits must be a non-negative integer, got -3"),
        ({"sequence_bits": True}, "sequence_bits must be a non-negative integer, got True"),
        ({"clock_sequence_bits": 1.0}, "got 1.0"),
        ({"worker_bits": "10"}, "got '10'"),
        ({"time_bits": 0}, "time_bits must be at least 1, got 0"),
        ({"time_unit_ms": 0}, "time_unit_ms must be a positive integer, got 0"),
        ({"time_unit_ms": -10}, "got -10"),
        ({"time_unit_ms": True}, "got True"),
        ({"time_unit_ms": 0.5}, "got 0.5"),
        ({"epoch": -1}, "-1 ms"),
    ],
)
def test_invalid_layout(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BitLayout(**kwargs)


def test_largest_layout_is_valid():
    layout = BitLayout(time_bits=1, datacenter_bits=2, clock_sequence_bits=20, sequence_bits=30)
    assert layout.total_bits == MAX_BITS
    assert layout.max_id == 2**63 - 1


@pytest.mark.parametrize(
    "epoch",
    [
        "2025-01-01T00:00:00Z",
        "2025-01-01T00:00:00+00:00",
        "2025-01-01T01:00:00+01:00",
        "2024-12-31T19:00:00-05:00",
        "2025-01-01 00:00:00.000Z",
        EPOCH,
        datetime(2025, 1, 1, 5, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        EPOCH_MS,
    ],
)
def test_epoch_spellings_are_equal(epoch):
    layout = BitLayout(epoch=epoch)
    assert layout == BitLayout(epoch=EPOCH_MS)
    assert hash(layout) == hash(BitLayout(epoch=EPOCH_MS))
    assert layout.epoch_ms == EPOCH_MS
    assert layout.epoch_datetime == EPOCH
    assert layout.fingerprint == BitLayout().fingerprint


@pytest.mark.parametrize(
    ("epoch", "error", "message"),
    [
        (datetime(2025, 1, 1), ValueError, "no time zone"),
        ("2025-01-01T00:00:00", ValueError, "no time zone"),
        ("2025-01-01", ValueError, "no time zone"),
        ("yesterday", ValueError, "'yesterday' is not an ISO-8601"),
        ("", ValueError, "is not an ISO-8601"),
        ("2025-13-01T00:00:00Z", ValueError, "is not an ISO-8601"),
        ("1969-12-31T23:59:59Z", ValueError, "before 1970"),
        (True, TypeError, "True"),
        (1.5e12, TypeError, "float"),
        (None, TypeError, "NoneType"),
    ],
)
def test_invalid_epoch(epoch, error, message):
    with pytest.raises(error, match=message):
        BitLayout(epoch=epoch)


@settings(max_examples=300, deadline=None)
@given(layouts_with_fields())
def test_decompose_inverts_compose(case):
    layout, fields = case
    value = layout.compose(**fields)
    assert 0 <= value <= layout.max_id
    parts = layout.decompose(value)
    assert parts == SnowflakeParts(
        id=value,
        timestamp=datetime.fromtimestamp(0, UTC)
        + timedelta(milliseconds=layout.epoch_ms + fields["timestamp"] * layout.time_unit_ms),
        datacenter_id=fields["datacenter_id"],
        clock_sequence=fields["clock_sequence"],
        worker_id=fields["worker_id"],
        sequence=fields["sequence"],
    )
    assert layout.decompose(str(value)) == parts
    assert layout.to_units(layout.unit_start_ms(fields["timestamp"])) == fields["timestamp"]


@settings(max_examples=100, deadline=None)
@given(layouts_with_fields(), st.sampled_from(list(BIT_FIELDS)))
def test_compose_rejects_fields_that_do_not_fit(case, bits_name):
    layout, fields = case
    name = {
        "time_bits": "timestamp",
        "datacenter_bits": "datacenter_id",
        "clock_sequence_bits": "clock_sequence",
        "worker_bits": "worker_id",
        "sequence_bits": "sequence",
    }[bits_name]
    for bad in (1 << getattr(layout, bits_name), -1):
        with pytest.raises(ValueError, match=f"{name} {bad} is outside"):
            layout.compose(**{**fields, name: bad})


def test_compose_places_fields_in_documented_order():
    layout = BitLayout(
        time_bits=5, datacenter_bits=4, clock_sequence_bits=3, worker_bits=2, sequence_bits=1
    )
    value = layout.compose(0b10101, datacenter_id=0b1001, clock_sequence=0b011, worker_id=0b10)
    assert value == 0b0_10101_1001_011_10_0
    assert layout.compose(0, sequence=1) == 1


def test_decompose_past_year_9999_is_invalid():
    layout = BitLayout(time_bits=50, worker_bits=5, sequence_bits=8)
    end = (LAST_DATETIME_MS - layout.epoch_ms) // layout.time_unit_ms
    assert layout.decompose(layout.compose(end)).timestamp.year == 9999
    with pytest.raises(InvalidSnowflake, match="9999"):
        layout.decompose(layout.compose(end + 1))
    with pytest.raises(InvalidSnowflake):
        layout.decompose(layout.max_id)


TWITTER = BitLayout.preset("twitter")
JS_SAFE = BitLayout.preset("js_safe")


@pytest.mark.parametrize(
    ("layout", "value"),
    [
        (TWITTER, True),
        (TWITTER, False),
        (TWITTER, 1.0),
        (TWITTER, 12.5),
        (TWITTER, None),
        (TWITTER, b"123"),
        (TWITTER, [1]),
        (TWITTER, -1),
        (TWITTER, -(2**63)),
        (TWITTER, 2**63),
        (TWITTER, 2**64 + 5),
        (TWITTER, "9223372036854775808"),
        (TWITTER, "9999999999999999999"),
        (TWITTER, "00000000000000000001"),
        (TWITTER, "1" * 20),
        (TWITTER, "9" * 4300),
        (TWITTER, "١٢٣"),
        (TWITTER, "\uff11\uff12\uff13"),
        (TWITTER, "²"),
        (TWITTER, "+1"),
        (TWITTER, "-1"),
        (TWITTER, " 1"),
        (TWITTER, "1 "),
        (TWITTER, "1\n"),
        (TWITTER, ""),
        (TWITTER, "1_000"),
        (TWITTER, "0x10"),
        (TWITTER, "1e3"),
        (JS_SAFE, 2**53),
        (JS_SAFE, str(2**53)),
    ],
)
def test_validate_and_decompose_reject(layout, value):
    for method in (layout.validate, layout.decompose):
        with pytest.raises(InvalidSnowflake) as info:
            method(value)
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, SnowflakeError)
        assert len(str(info.value)) < 200


@pytest.mark.parametrize(
    ("layout", "value", "expected"),
    [
        (TWITTER, 0, 0),
        (TWITTER, "0", 0),
        (TWITTER, "007", 7),
        (TWITTER, 2**63 - 1, 2**63 - 1),
        (TWITTER, "9223372036854775807", 2**63 - 1),
        (TWITTER, "1" * 19, int("1" * 19)),
        (JS_SAFE, 2**53 - 1, 2**53 - 1),
    ],
)
def test_validate_accepts(layout, value, expected):
    assert layout.validate(value) == expected
    assert type(layout.validate(value)) is int
    assert layout.decompose(value).id == expected


def test_invalid_snowflake_message_names_the_range():
    with pytest.raises(
        InvalidSnowflake, match=rf"{2**53} is too large \(the largest ID is {2**53 - 1}\)"
    ):
        JS_SAFE.validate(2**53)


def test_as_dict():
    value = TWITTER.compose(1000, worker_id=3, sequence=7)
    assert TWITTER.decompose(value).as_dict() == {
        "id": value,
        "timestamp": "2025-01-01T00:00:01Z",
        "datacenter_id": 0,
        "clock_sequence": 0,
        "worker_id": 3,
        "sequence": 7,
    }


@st.composite
def layout_and_instant(draw: st.DrawFn) -> tuple[BitLayout, int, datetime]:
    layout = draw(
        st.sampled_from(
            [TWITTER, JS_SAFE, BitLayout.preset("sonyflake"), BitLayout.preset("baidu")]
        )
        | layouts(max_total=40).filter(lambda layout: representable_max_time(layout) >= 1)
    )
    units = draw(st.integers(0, representable_max_time(layout) - 1))
    offset_us = draw(st.integers(0, layout.time_unit_ms * 1000 - 1))
    instant = layout.epoch_datetime + timedelta(
        milliseconds=units * layout.time_unit_ms, microseconds=offset_us
    )
    return layout, units, instant


@settings(max_examples=300, deadline=None)
@given(layout_and_instant(), st.data())
def test_min_and_max_id_bracket_the_time_unit(case, data):
    layout, units, instant = case
    low, high = layout.min_id_for(instant), layout.max_id_for(instant)
    assert low == layout.compose(units)
    assert layout.decompose(low).timestamp <= instant
    assert high == (layout.compose(units + 1) - 1 if units < layout.max_time else layout.max_id)
    value = layout.compose(
        units,
        datacenter_id=data.draw(st.integers(0, layout.max_datacenter_id)),
        clock_sequence=data.draw(st.integers(0, layout.max_clock_sequence)),
        worker_id=data.draw(st.integers(0, layout.max_worker_id)),
        sequence=data.draw(st.integers(0, layout.max_sequence)),
    )
    assert low <= value <= high
    if low > 0:
        assert layout.decompose(low - 1).timestamp < layout.decompose(low).timestamp
    if high < layout.max_id:
        assert layout.decompose(high + 1).timestamp > instant
    local = instant.astimezone(timezone(timedelta(hours=-7)))
    assert (layout.min_id_for(local), layout.max_id_for(local)) == (low, high)


@pytest.mark.parametrize("layout", [TWITTER, JS_SAFE, BitLayout(time_bits=3, time_unit_ms=10)])
def test_min_and_max_id_clamp_outside_the_lifespan(layout):
    epoch = layout.epoch_datetime
    before = [
        epoch - timedelta(microseconds=1),
        epoch - timedelta(days=365),
        datetime.min.replace(tzinfo=UTC),
    ]
    for dt in before:
        assert (layout.min_id_for(dt), layout.max_id_for(dt)) == (0, -1)
    assert layout.min_id_for(epoch) == 0
    assert layout.max_id_for(epoch) == layout.compose(1) - 1
    end = layout.lifespan_end
    for dt in (end, end + timedelta(days=1), datetime.max.replace(tzinfo=UTC)):
        assert (layout.min_id_for(dt), layout.max_id_for(dt)) == (layout.max_id + 1, layout.max_id)
    last = end - timedelta(microseconds=1)
    assert layout.min_id_for(last) == layout.compose(layout.max_time)
    assert layout.max_id_for(last) == layout.max_id


def test_min_and_max_id_reject_naive_datetimes():
    for method in (TWITTER.min_id_for, TWITTER.max_id_for):
        with pytest.raises(ValueError, match="no time zone"):
            method(datetime(2025, 6, 1))


@pytest.mark.parametrize(
    ("layout", "ids_per_second", "workers", "lifespan_end"),
    [
        (TWITTER, 4_096_000, 1024, "2094-09-07T15:47:35.552000+00:00"),
        (BitLayout.preset("sonyflake"), 25_600, 65_536, "2199-03-19T03:28:58.880000+00:00"),
        (BitLayout.preset("baidu"), 8192, 4_194_304, "2033-07-04T21:24:16+00:00"),
        (JS_SAFE, 64_000, 64, "2094-09-07T15:47:35.552000+00:00"),
        (
            BitLayout(time_bits=40, datacenter_bits=5, worker_bits=5, sequence_bits=13, epoch=0),
            8_192_000,
            1024,
            "2004-11-03T19:53:47.776000+00:00",
        ),
        (
            BitLayout(time_bits=2, sequence_bits=0, time_unit_ms=3000),
            0,
            1024,
            "2025-01-01T00:00:12+00:00",
        ),
        (
            BitLayout(time_bits=30, sequence_bits=3, time_unit_ms=7),
            1142,
            1024,
            "2025-03-28T23:49:52.768000+00:00",
        ),
    ],
)
def test_capacity(layout, ids_per_second, workers, lifespan_end):
    assert layout.ids_per_second == ids_per_second
    assert layout.workers == workers
    assert layout.lifespan_end.isoformat() == lifespan_end


def test_lifespan_end_past_year_9999_does_not_overflow():
    layout = BitLayout(time_bits=50, worker_bits=5, sequence_bits=8)
    assert layout.lifespan_end == datetime.max.replace(tzinfo=UTC)
    assert "time" in str(layout)


def test_fingerprint_is_stable():
    assert TWITTER.fingerprint == "v1/41-0-0-10-12/1ms/1735689600000"
    assert BitLayout.preset("baidu", epoch=0).fingerprint == "v1/28-0-0-22-13/1000ms/0"
    assert BitLayout(epoch="2025-01-01T00:00:00Z").fingerprint == TWITTER.fingerprint


@pytest.mark.parametrize(
    "changes",
    [
        {"time_bits": 40},
        {"datacenter_bits": 1, "worker_bits": 9},
        {"clock_sequence_bits": 1, "worker_bits": 9},
        {"worker_bits": 9},
        {"sequence_bits": 11},
        {"worker_bits": 11, "sequence_bits": 11},
        {"time_unit_ms": 2},
        {"epoch": EPOCH_MS + 1},
        {"epoch": "2024-01-01T00:00:00Z"},
    ],
)
def test_fingerprint_differs_when_any_field_differs(changes):
    other = BitLayout(**changes)
    assert other != TWITTER
    assert other.fingerprint != TWITTER.fingerprint


@settings(max_examples=200, deadline=None)
@given(layouts(), layouts())
def test_fingerprint_identifies_the_layout(first, second):
    assert (first.fingerprint == second.fingerprint) == (first == second)
    rebuilt = {name: getattr(first, name) for name in (*BIT_FIELDS, "time_unit_ms")}
    assert BitLayout(**rebuilt, epoch=first.epoch_ms).fingerprint == first.fingerprint


def test_layout_is_frozen():
    with pytest.raises(AttributeError):
        TWITTER.time_bits = 40  # type: ignore[misc]
