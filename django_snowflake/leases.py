"""A generator's worker slot: the :class:`Lease` it is handed, and its records of what it used.

This module imports nothing from Django. An allocator hands a
:class:`~django_snowflake.generator.SnowflakeGenerator` a lease: a worker slot and the time
units it may issue in there, above the previous holders' reserved time and below its own
reservation. A generator that goes back in time within its slot keeps a record of the units
it used there, so that it never issues a (unit, sequence) pair twice:

* :class:`UsedTime`, in test mode, of every unit, since a test suite's clock goes back and
  stands still where a real one does not (DESIGN section 5, "Frozen clocks"); a lease carries
  what earlier generators of this process used in the slot, and the holder issues outside it;
* :class:`Ring`, under the ``ring`` rollback policy, of the last units it may go back to.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .layout import BitLayout


def fake_time_loaded() -> bool:
    """Whether freezegun or time-machine is imported: then the process is a test suite."""
    return "freezegun" in sys.modules or "time_machine" in sys.modules


class UsedTime:
    """What a slot used, in test mode: the last sequence of each time unit, and spans of
    units to treat as spent (used before test mode began, their sequences unknown)."""

    def __init__(self) -> None:
        self.units: dict[int, int] = {}
        self.spans: list[tuple[int, int]] = []  # sorted, disjoint (lo, hi)

    def copy(self) -> UsedTime:
        other = UsedTime()
        other.units = dict(self.units)
        other.spans = list(self.spans)
        return other

    def note(self, unit: int, seq: int) -> None:
        """Record that ``unit`` used sequences up to ``seq``."""
        if seq > self.units.get(unit, -1):
            self.units[unit] = seq

    def spend(self, lo: int, hi: int) -> None:
        """Treat units ``lo`` to ``hi`` as spent."""
        spans = [*self.spans, (lo, hi)]
        spans.sort()
        merged: list[tuple[int, int]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        self.spans = merged

    def merge(self, other: UsedTime) -> None:
        for unit, seq in other.units.items():
            self.note(unit, seq)
        for lo, hi in other.spans:
            self.spend(lo, hi)

    def after_spans(self, unit: int) -> int:
        """``unit``, or the first unit after the spent span that holds it."""
        i = bisect.bisect_right(self.spans, (unit, math.inf)) - 1
        if i >= 0 and self.spans[i][1] >= unit:
            return self.spans[i][1] + 1
        return unit

    def first_free(self, unit: int, max_seq: int, stop: int) -> int:
        """The first unit from ``unit`` outside the spent spans whose last sequence used is
        below ``max_seq``; or, should the search reach ``stop`` first, the first unit outside
        the spans at or above it."""
        while True:
            unit = self.after_spans(unit)
            if unit >= stop or self.units.get(unit, -1) < max_seq:
                return unit
            unit += 1

    def top(self) -> int:
        """The highest unit used (-1: none)."""
        return max(max(self.units, default=-1), max((hi for _, hi in self.spans), default=-1))


class Ring:
    """The ring policy's record: the last sequence used in each of the last ``size`` units."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.clear()

    def clear(self) -> None:
        self._slots: list[tuple[int, int]] = [(-1, -1)] * self.size

    def note(self, unit: int, seq: int) -> None:
        """Record that ``unit`` used sequences up to ``seq`` (forgetting ``unit - size``)."""
        self._slots[unit % self.size] = (unit, seq)

    def last_seq(self, unit: int) -> int:
        """The last sequence used in ``unit`` (-1: none recorded)."""
        held, seq = self._slots[unit % self.size]
        return seq if held == unit else -1


@dataclasses.dataclass(frozen=True)
class Lease:
    """A worker slot handed to a generator by its lease source.

    ``floor`` and ``limit`` are in time units since the epoch: the holder issues IDs only with
    times strictly above ``floor`` and strictly below ``limit`` (``None``: until the layout's
    lifespan ends). ``clock_sequence`` is the slot's current clock-sequence value.
    ``history``, for a slot that earlier generators of this process used: what they used
    (see :meth:`~django_snowflake.generator.SnowflakeGenerator.used_time`); the holder issues
    outside it and is in test mode.

    ``ahead``, for a floor ahead of the clock that the holder may issue above at once (the
    skip after a failover): ``(bound, since)``, where ``since`` is a ``time.monotonic_ns()``
    reading and ``bound`` a time unit. While the clock is behind, the holder goes on above the
    floor as a logical clock, every unit below ``bound`` plus the units of monotonic time
    elapsed since ``since``: its keys never run further ahead of the time they are issued at
    than ``bound`` was of ``since``, whatever the wall clock does, which is what bounds them
    for the claims of a later failover.
    """

    worker_id: int
    datacenter_id: int = 0
    floor: int = -1
    limit: int | None = None
    clock_sequence: int = 0
    history: UsedTime | None = dataclasses.field(default=None, compare=False)
    ahead: tuple[int, int] | None = None

    def check(self, layout: BitLayout) -> None:
        """Raise ``ValueError`` unless the slot and clock sequence fit ``layout``."""
        for name, value, limit in (
            ("worker_id", self.worker_id, layout.max_worker_id),
            ("datacenter_id", self.datacenter_id, layout.max_datacenter_id),
            ("clock_sequence", self.clock_sequence, layout.max_clock_sequence),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
                raise ValueError(f"{name} {value!r} is outside 0..{limit} for this layout")
