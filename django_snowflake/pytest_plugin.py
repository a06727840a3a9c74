"""A pytest plugin for projects that use django_snowflake; pytest loads it by itself.

It provides the ``snowflake_clock`` fixture, and with pytest-django it releases the process's
worker slot before the test databases are dropped. Importing this module touches neither
Django's settings nor the app registry, so it is harmless in test suites that do not use Django.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

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


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any]:
    """Once pytest-django's ``django_db_setup`` (or a project's own) has set the test databases
    up, have the process release its worker slot before that fixture drops them.

    A slot claimed in a test database lives there, and the release at exit would find the
    database gone ("no such table", "database does not exist"). A finalizer added after the
    fixture's own runs before it; the next ID, if any, builds a new generator.
    """
    outcome = yield
    if fixturedef.argname != "django_db_setup" or outcome.excinfo is not None:
        return
    blocker = request.getfixturevalue("django_db_blocker")

    def release() -> None:
        from . import runtime

        with blocker.unblock():
            runtime.reset()

    fixturedef.addfinalizer(release)
