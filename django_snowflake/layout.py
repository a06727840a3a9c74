"""The bit layout of a Snowflake ID: compose, decompose, capacity and fingerprint.

Bit order, most significant first::

    0 | time | datacenter | clock_sequence | worker | sequence

This module imports nothing from Django, so it can be used in scripts and tests alone.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, overload

from .exceptions import InvalidSnowflake

EpochLike = datetime | str | int

DEFAULT_EPOCH = "2025-01-01T00:00:00Z"
MAX_BITS = 63
# A base-10 string of a 63-bit integer has at most 19 digits; longer input is rejected before
# int() so a hostile string cannot make us parse thousands of digits.
_MAX_DIGITS = 19

PRESETS: dict[str, dict[str, int]] = {
    "twitter": {"time_bits": 41, "worker_bits": 10, "sequence_bits": 12, "time_unit_ms": 1},
    "sonyflake": {"time_bits": 39, "worker_bits": 16, "sequence_bits": 8, "time_unit_ms": 10},
    "baidu": {"time_bits": 28, "worker_bits": 22, "sequence_bits": 13, "time_unit_ms": 1000},
    "js_safe": {"time_bits": 41, "worker_bits": 6, "sequence_bits": 6, "time_unit_ms": 1},
}

_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

BIT_FIELDS = ("time_bits", "datacenter_bits", "clock_sequence_bits", "worker_bits", "sequence_bits")


def parse_epoch(value: object) -> int:
    """Return ``value`` as integer milliseconds since 1970-01-01 UTC.

    Accepts an aware ``datetime``, an ISO-8601 string with an offset (``Z`` included) or an
    ``int`` of milliseconds. Raises ``ValueError`` (or ``TypeError``) naming the value otherwise.
    """
    if isinstance(value, bool):
        raise TypeError(f"EPOCH must be a datetime, an ISO-8601 string or int ms, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"EPOCH must not be before 1970, got {value} ms")
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"EPOCH {value!r} is not an ISO-8601 date and time") from None
        return parse_epoch(parsed)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"EPOCH {value.isoformat()} has no time zone; give an aware datetime")
        return parse_epoch((value - _UNIX_EPOCH) // timedelta(milliseconds=1))
    raise TypeError(
        f"EPOCH must be a datetime, an ISO-8601 string or int ms, not {type(value).__name__}"
    )


def ms_to_datetime(ms: int) -> datetime:
    """Return an aware UTC datetime for ``ms`` milliseconds since 1970."""
    return _UNIX_EPOCH + timedelta(milliseconds=ms)


def _shorten(digits: str) -> str:
    """A long run of digits, cut in the middle so a message stays one readable line."""
    return digits if len(digits) <= 40 else f"{digits[:18]}...{digits[-18:]} ({len(digits)} digits)"


class SnowflakeParts(NamedTuple):
    """The fields of one ID, as returned by :meth:`BitLayout.decompose`."""

    id: int
    timestamp: datetime
    datacenter_id: int
    clock_sequence: int
    worker_id: int
    sequence: int

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: the timestamp as ISO-8601 UTC, everything else as integers."""
        data = self._asdict()
        data["timestamp"] = self.timestamp.isoformat().replace("+00:00", "Z")
        return data


class AllOnes:
    """A layout's largest value for a field of ``bits`` bits: all of them set, ``2**bits - 1``.

    Read from the layout, as its ``max_*`` attributes; read from the class, the descriptor.
    """

    def __init__(self, bits: str) -> None:
        self.bits = bits

    @overload
    def __get__(self, layout: None, owner: type[BitLayout]) -> AllOnes: ...

    @overload
    def __get__(self, layout: BitLayout, owner: type[BitLayout]) -> int: ...

    def __get__(self, layout: BitLayout | None, owner: type[BitLayout]) -> AllOnes | int:
        if layout is None:
            return self
        bits: int = getattr(layout, self.bits)
        return (1 << bits) - 1

    def __repr__(self) -> str:
        return f"2**{self.bits} - 1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BitLayout:
    """How the 63 usable bits of an ID are split, the time unit and the epoch.

    Invalid values raise ``ValueError`` naming the numbers. Instances are immutable and
    hashable; two layouts are equal when every field (epoch included) is.
    """

    time_bits: int = 41
    datacenter_bits: int = 0
    clock_sequence_bits: int = 0
    worker_bits: int = 10
    sequence_bits: int = 12
    time_unit_ms: int = 1
    epoch: dataclasses.InitVar[EpochLike] = DEFAULT_EPOCH
    epoch_ms: int = dataclasses.field(init=False)

    def __post_init__(self, epoch: EpochLike) -> None:
        for name in BIT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if self.time_bits < 1:
            raise ValueError(f"time_bits must be at least 1, got {self.time_bits}")
        if self.total_bits > MAX_BITS:
            parts = " + ".join(f"{getattr(self, name)}" for name in BIT_FIELDS)
            raise ValueError(
                f"The layout uses {parts} = {self.total_bits} bits; at most {MAX_BITS} fit "
                "in a signed 64-bit integer"
            )
        unit = self.time_unit_ms
        if isinstance(unit, bool) or not isinstance(unit, int) or unit < 1:
            raise ValueError(f"time_unit_ms must be a positive integer, got {unit!r}")
        object.__setattr__(self, "epoch_ms", parse_epoch(epoch))

    @classmethod
    def preset(cls, name: str, epoch: EpochLike | None = None) -> BitLayout:
        """Return the named preset (``twitter``, ``sonyflake``, ``baidu``, ``js_safe``).

        Raises ``ValueError`` for an unknown name.
        """
        try:
            bits = PRESETS[name]
        except (KeyError, TypeError):
            raise ValueError(
                f"Unknown layout preset {name!r}; choose one of {', '.join(PRESETS)}"
            ) from None
        return cls(**bits, epoch=DEFAULT_EPOCH if epoch is None else epoch)

    # Shifts and limits, derived from the bits.

    @property
    def total_bits(self) -> int:
        return sum(getattr(self, name) for name in BIT_FIELDS)

    @property
    def worker_shift(self) -> int:
        return self.sequence_bits

    @property
    def clock_sequence_shift(self) -> int:
        return self.worker_shift + self.worker_bits

    @property
    def datacenter_shift(self) -> int:
        return self.clock_sequence_shift + self.clock_sequence_bits

    @property
    def time_shift(self) -> int:
        return self.datacenter_shift + self.datacenter_bits

    # The largest value of each field: all of its bits set.
    max_id = AllOnes("total_bits")
    max_time = AllOnes("time_bits")
    """The last time value, in units since the epoch, that fits in ``time_bits``."""
    max_sequence = AllOnes("sequence_bits")
    max_worker_id = AllOnes("worker_bits")
    max_datacenter_id = AllOnes("datacenter_bits")
    max_clock_sequence = AllOnes("clock_sequence_bits")

    # Capacity and lifespan.

    @property
    def ids_per_second(self) -> int:
        """IDs one worker can issue per second before its sequence runs out."""
        return (self.max_sequence + 1) * 1000 // self.time_unit_ms

    @property
    def workers(self) -> int:
        """Worker slots in the whole space: workers per datacenter times datacenters."""
        return (1 << self.worker_bits) << self.datacenter_bits

    @property
    def epoch_datetime(self) -> datetime:
        return ms_to_datetime(self.epoch_ms)

    @property
    def lifespan_end(self) -> datetime:
        """The first instant no ID can carry: the epoch plus ``2**time_bits`` units.

        ``datetime.max`` (UTC) when that instant lies past the year 9999.
        """
        try:
            return ms_to_datetime(self.unit_start_ms(self.max_time + 1))
        except OverflowError:
            return datetime.max.replace(tzinfo=UTC)

    @property
    def fingerprint(self) -> str:
        """A stable, readable identity of the layout, stored with every worker slot."""
        bits = "-".join(str(getattr(self, name)) for name in BIT_FIELDS)
        return f"v1/{bits}/{self.time_unit_ms}ms/{self.epoch_ms}"

    @classmethod
    def from_fingerprint(cls, fingerprint: str) -> BitLayout:
        """The layout a :attr:`fingerprint` was made from (as stored in ``WorkerNode.layout``).

        Raises ``ValueError`` when ``fingerprint`` is not one this version writes.
        """
        try:
            version, bits, unit, epoch = fingerprint.split("/")
            values = [int(part) for part in bits.split("-")]
            if version != "v1" or len(values) != len(BIT_FIELDS) or not unit.endswith("ms"):
                raise ValueError
            return cls(
                **dict(zip(BIT_FIELDS, values, strict=True)),
                time_unit_ms=int(unit.removesuffix("ms")),
                epoch=int(epoch),
            )
        except (ValueError, TypeError, AttributeError):
            raise ValueError(f"{fingerprint!r} is not a layout fingerprint") from None

    def __str__(self) -> str:
        return (
            f"{self.time_bits} time / {self.datacenter_bits} datacenter / "
            f"{self.clock_sequence_bits} clock sequence / {self.worker_bits} worker / "
            f"{self.sequence_bits} sequence bits, {self.time_unit_ms} ms units since "
            f"{self.epoch_datetime.isoformat()}"
        )

    # Time conversion.

    def to_units(self, ms: int) -> int:
        """Time units since the epoch of ``ms`` milliseconds since 1970 (floored)."""
        return (ms - self.epoch_ms) // self.time_unit_ms

    def unit_start_ms(self, units: int) -> int:
        """Milliseconds since 1970 at which time unit ``units`` begins."""
        return self.epoch_ms + units * self.time_unit_ms

    # Compose and decompose.

    def compose(
        self,
        timestamp: int,
        *,
        worker_id: int = 0,
        sequence: int = 0,
        datacenter_id: int = 0,
        clock_sequence: int = 0,
    ) -> int:
        """Return the ID made of these fields; ``timestamp`` is in units since the epoch.

        Raises ``ValueError`` when a field does not fit its bits.
        """
        for name, value, limit in (
            ("timestamp", timestamp, self.max_time),
            ("datacenter_id", datacenter_id, self.max_datacenter_id),
            ("clock_sequence", clock_sequence, self.max_clock_sequence),
            ("worker_id", worker_id, self.max_worker_id),
            ("sequence", sequence, self.max_sequence),
        ):
            if not 0 <= value <= limit:
                raise ValueError(f"{name} {value} is outside 0..{limit} for this layout")
        return (
            timestamp << self.time_shift
            | datacenter_id << self.datacenter_shift
            | clock_sequence << self.clock_sequence_shift
            | worker_id << self.worker_shift
            | sequence
        )

    def validate(self, value: object) -> int:
        """Return ``value`` as an ID of this layout, or raise :class:`InvalidSnowflake`.

        Accepts an ``int`` or a string of ASCII digits, from 0 to :attr:`max_id`. A whole
        number above :attr:`max_id` (however many digits it has) is "too large", naming the
        largest ID; anything else is "not a Snowflake ID".
        """
        if self.is_too_large(value):
            shown = value if isinstance(value, int) else _shorten(str(value))
            raise InvalidSnowflake(f"{shown} is too large (the largest ID is {self.max_id})")
        if isinstance(value, str):
            if not (0 < len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit()):
                raise InvalidSnowflake(f"{value[:40]!r} is not a Snowflake ID: expected digits")
            number = int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise InvalidSnowflake(
                f"A Snowflake ID is an integer or a string of digits, not {type(value).__name__}"
            )
        if number < 0:
            raise InvalidSnowflake(f"{number} is negative; IDs run from 0 to {self.max_id}")
        return number

    def is_too_large(self, value: object) -> bool:
        """Whether ``value`` is a whole number (``int`` or ASCII digits) above :attr:`max_id`.

        Forms and serializers use it to say "too large" rather than "not an ID".
        """
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return value > self.max_id
        if isinstance(value, str) and value.isascii() and value.isdigit():
            # Compare lengths first, so a hostile string of a million digits is not parsed.
            digits = value.lstrip("0")
            limit = str(self.max_id)
            return len(digits) > len(limit) or (
                len(digits) == len(limit) and int(digits) > self.max_id
            )
        return False

    def decompose(self, value: object) -> SnowflakeParts:
        """Split an ID into its fields; raises :class:`InvalidSnowflake` for bad input."""
        number = self.validate(value)
        units = number >> self.time_shift
        try:
            timestamp = ms_to_datetime(self.unit_start_ms(units))
        except OverflowError:
            raise InvalidSnowflake(
                f"{number} carries a time past the year 9999, which no datetime can hold"
            ) from None
        return SnowflakeParts(
            id=number,
            timestamp=timestamp,
            datacenter_id=(number >> self.datacenter_shift) & self.max_datacenter_id,
            clock_sequence=(number >> self.clock_sequence_shift) & self.max_clock_sequence,
            worker_id=(number >> self.worker_shift) & self.max_worker_id,
            sequence=number & self.max_sequence,
        )

    # Range bounds, for index-friendly time filters.

    def _units_of(self, dt: datetime) -> int:
        """Units since the epoch of the unit holding ``dt`` (floored)."""
        return self.to_units(_ms_of(dt))

    def _units_from(self, dt: datetime) -> int:
        """The first unit that starts at or after ``dt`` (``dt`` rounded up, to the microsecond)."""
        micros = (_aware_utc(dt) - _UNIX_EPOCH) // timedelta(microseconds=1)
        return -((self.epoch_ms * 1000 - micros) // (self.time_unit_ms * 1000))

    def _id_of_unit(self, units: int) -> int:
        """The first ID of unit ``units``, clamped to ``0 .. max_id + 1``."""
        return min(max(units, 0), self.max_time + 1) << self.time_shift

    def min_id_for(self, dt: datetime) -> int:
        """The smallest ID whose time unit is not before the unit holding ``dt``.

        Before the epoch that is 0; past the lifespan it is ``max_id + 1``, which no ID
        reaches. Every ID below it lies in a unit that ended at or before ``dt``, so
        ``pk < min_id_for(dt)`` selects rows certainly created before ``dt``.
        """
        return self._id_of_unit(self._units_of(dt))

    def min_id_from(self, dt: datetime) -> int:
        """The smallest ID whose time unit starts at or after ``dt``.

        Equal to :meth:`min_id_for` when ``dt`` is the start of a unit; inside a unit it is
        the next unit's first ID, because an ID of the unit holding ``dt`` may have been
        issued before ``dt``. ``pk >= min_id_from(dt)`` selects rows certainly created at or
        after ``dt``. Clamped like :meth:`min_id_for`.
        """
        return self._id_of_unit(self._units_from(dt))

    def max_id_for(self, dt: datetime) -> int:
        """The largest ID whose time unit is not after the unit holding ``dt``.

        Before the epoch that is -1 (no ID); past the lifespan it is :attr:`max_id`.
        """
        return self._id_of_unit(self._units_of(dt) + 1) - 1


def _aware_utc(dt: datetime) -> datetime:
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"{dt.isoformat()} has no time zone; give an aware datetime")
    return dt


def _ms_of(dt: datetime) -> int:
    """Milliseconds since 1970 of an aware datetime (floored)."""
    return (_aware_utc(dt) - _UNIX_EPOCH) // timedelta(milliseconds=1)


def bit_diagram(layout: BitLayout) -> str:
    """A text diagram of the layout's fields, most significant bit first::

    +---------+-----------+-------------+---------------+
    | sign: 0 | time (41) | worker (10) | sequence (12) |
    | 63      | 62-22     | 21-12       | 11-0          |
    +---------+-----------+-------------+---------------+

    The first column is the sign bit, always 0, with any bits the layout leaves unused; the
    others give their number of bits.
    """
    fields = [("sign", 64 - layout.total_bits)] + [
        (name.removesuffix("_bits").replace("_", " "), getattr(layout, name))
        for name in BIT_FIELDS
        if getattr(layout, name)
    ]
    top = 63
    labels, ranges = [], []
    for name, bits in fields:
        if name != "sign":
            labels.append(f"{name} ({bits})")
        else:
            labels.append("sign: 0" if bits == 1 else f"sign + unused ({bits}): 0")
        ranges.append(str(top) if bits == 1 else f"{top}-{top - bits + 1}")
        top -= bits
    widths = [max(len(a), len(b)) for a, b in zip(labels, ranges, strict=True)]
    rule = "+" + "+".join("-" * (width + 2) for width in widths) + "+"

    def row(cells: list[str]) -> str:
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(cells, widths, strict=True)) + "|"

    return "\n".join([rule, row(labels), row(ranges), rule])
