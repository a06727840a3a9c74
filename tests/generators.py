"""Generators on fake clocks, shared by the generator's test files.

The layouts they run on (the presets, tiny ones whose sequences run out in a few IDs, odd time
units, and each with clock-sequence bits), ``make`` (a generator on a FakeClock),
``units_of`` (the time units of IDs), ``CountingSource`` (a lease source that hands out
worker 1, 2, ...) and ``SystemTime`` (the system clock made to read a FakeClock, so that the
generator takes its fast path under a driven clock); ``write_summary`` prints how many IDs a
module checked.
"""

from __future__ import annotations

import time

import pytest

from django_snowflake.generator import Lease, SnowflakeGenerator
from django_snowflake.layout import BitLayout
from django_snowflake.testing import FakeClock

DAY_MS = 86_400_000


LAYOUTS = {
    "twitter": BitLayout.preset("twitter"),
    "sonyflake": BitLayout.preset("sonyflake"),
    "baidu": BitLayout.preset("baidu"),
    "js_safe": BitLayout.preset("js_safe"),
    "tiny": BitLayout(time_bits=30, worker_bits=3, sequence_bits=2),
    "tiny_10ms": BitLayout(
        time_bits=30, datacenter_bits=1, worker_bits=2, sequence_bits=3, time_unit_ms=10
    ),
    "odd_3ms": BitLayout(time_bits=34, worker_bits=4, sequence_bits=4, time_unit_ms=3),
}


CLOCK_SEQUENCE_LAYOUTS = {
    "twitter_cs": BitLayout(time_bits=41, clock_sequence_bits=2, worker_bits=8, sequence_bits=12),
    "sonyflake_cs": BitLayout(
        time_bits=39, clock_sequence_bits=2, worker_bits=14, sequence_bits=8, time_unit_ms=10
    ),
    "baidu_cs": BitLayout(
        time_bits=28, clock_sequence_bits=2, worker_bits=20, sequence_bits=13, time_unit_ms=1000
    ),
    "js_safe_cs": BitLayout(time_bits=41, clock_sequence_bits=2, worker_bits=4, sequence_bits=6),
    "tiny_cs": BitLayout(
        time_bits=30, datacenter_bits=1, clock_sequence_bits=2, worker_bits=3, sequence_bits=2
    ),
    "tiny_cs1_7ms": BitLayout(
        time_bits=32, clock_sequence_bits=1, worker_bits=2, sequence_bits=3, time_unit_ms=7
    ),
}


ALL_LAYOUTS = LAYOUTS | CLOCK_SEQUENCE_LAYOUTS


class SystemTime:
    """The ``time`` module as the generator sees it, with the system clock reading ``clock``."""

    def __init__(self, clock: FakeClock, offset_ns: int) -> None:
        self.clock, self.offset_ns = clock, offset_ns

    def time_ns(self) -> int:
        return self.clock.ms * 1_000_000 + self.offset_ns

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def make(layout=None, *, start_ms=DAY_MS, **kwargs):
    layout = layout or LAYOUTS["tiny"]
    clock = FakeClock(layout.epoch_ms + start_ms)
    kwargs.setdefault("worker_id", None if "lease_source" in kwargs else 1)
    generator = SnowflakeGenerator(layout, clock=clock, sleep=clock.sleep, **kwargs)
    return generator, clock


def units_of(layout: BitLayout, ids: list[int]) -> list[int]:
    return [value >> layout.time_shift for value in ids]


class CountingSource:
    """Hands out a lease per call: worker 1, 2, ... with the floor and limit it is given."""

    def __init__(self, floor: int = -1, limit: int | None = None, *, renew_by: int = 10) -> None:
        self.floor, self.limit, self.renew_by = floor, limit, renew_by
        self.leases: list[Lease] = []
        self.highs: list[int] = []
        self.same_slot = False

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        self.highs.append(generator.last_timestamp)
        if self.leases and (self.same_slot or generator.lease is not None):
            previous = self.leases[-1]
            limit = None if previous.limit is None else previous.limit + self.renew_by
            lease = Lease(
                previous.worker_id,
                floor=previous.floor,
                limit=limit,
                clock_sequence=previous.clock_sequence,
            )
        else:
            lease = Lease(len(self.leases) + 1, floor=self.floor, limit=self.limit)
        self.leases.append(lease)
        return lease


def write_summary(request: pytest.FixtureRequest, line: str) -> None:
    """Print ``line`` in pytest's output even when output is captured (how many IDs a module
    checked, so a run that checks nothing shows)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)
