"""A pytest plugin for projects that use django_snowflake; pytest loads it by itself.

It provides the ``snowflake_clock`` fixture. Importing this module touches neither Django's
settings nor the app registry, so it is harmless in test suites that do not use Django.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .generator import system_clock
from .testing import FakeClock, driven_clock


@pytest.fixture
def snowflake_clock() -> Iterator[FakeClock]:
    """A :class:`~django_snowflake.testing.FakeClock` under the process-local generator.

    It starts at the current time and moves only when the test says so
    (``snowflake_clock.advance(60_000)``), so IDs, ``created_at`` and the ``created_*``
    filters can be tested at chosen times without sleeping. Moving it back tests the clock
    rollback policy. Afterwards the real clock is restored; if the test moved time forward,
    the generator is rebuilt so that later tests do not find the real clock behind it. That
    suits the recommended test settings (a ``static`` worker ID); the ``database`` allocator
    would remember the future time in the worker table.
    """
    from . import get_generator, runtime

    generator = get_generator()
    with driven_clock(generator) as clock:
        yield clock
    if generator.last_timestamp > generator.layout.to_units(system_clock()):
        runtime.reset()
