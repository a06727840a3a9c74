"""Helpers for tests: a clock that tests drive, and a way to put it under a generator."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from .generator import SnowflakeGenerator, system_clock


class FakeClock:
    """A clock in integer milliseconds since 1970 that only moves when told to.

    Call it to read the time; pass :meth:`sleep` as the generator's ``sleep`` so that a
    generator waiting for the next time unit advances this clock instead of blocking.
    """

    def __init__(self, start_ms: int | None = None) -> None:
        self.ms = system_clock() if start_ms is None else start_ms
        self.slept_ms = 0

    def __call__(self) -> int:
        return self.ms

    def sleep(self, seconds: float) -> None:
        step = max(1, math.ceil(seconds * 1000))
        self.ms += step
        self.slept_ms += step

    def advance(self, ms: int) -> None:
        """Move the clock forward (or, with a negative ``ms``, back)."""
        self.ms += ms

    def rewind(self, ms: int) -> None:
        """Move the clock back ``ms`` milliseconds, as a stepped NTP correction would."""
        self.ms -= ms


@contextmanager
def driven_clock(
    generator: SnowflakeGenerator | None = None, start_ms: int | None = None
) -> Iterator[FakeClock]:
    """Run the block with ``generator`` (default: the process-local one) on a :class:`FakeClock`.

    The real clock is restored afterwards. Moving the fake clock back tests the rollback
    policy; moving it forward tests time filters without sleeping.
    """
    if generator is None:
        from . import get_generator

        generator = get_generator()
    clock = FakeClock(start_ms)
    saved = generator.use_clock(clock, clock.sleep)
    try:
        yield clock
    finally:
        generator.use_clock(*saved)
