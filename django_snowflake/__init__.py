"""Snowflake primary keys for Django: 64-bit, time-ordered, unique across every app server.

Importing this package touches neither the settings nor the app registry, so it is safe to
import from ``settings.py``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import time
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING

from .exceptions import GeneratorClosed

if TYPE_CHECKING:
    from .generator import SnowflakeGenerator
    from .layout import SnowflakeParts

__all__ = ["decode", "generate", "generate_many", "get_generator", "max_id_for", "min_id_for"]
# The installed distribution's version (pyproject.toml), so there is one place to bump it.
__version__ = importlib.metadata.version("django-snowflake-id")


# ``django_snowflake.runtime`` once a generator was asked for. It imports Django, so it is
# imported late; keeping a reference spares ``generate()`` an import statement per call.
_runtime: ModuleType | None = None


def get_generator() -> SnowflakeGenerator:
    """The process-local generator; its worker slot is claimed at the first ID.

    Raises ``ImproperlyConfigured`` when ``settings.SNOWFLAKE`` is invalid.
    """
    global _runtime
    from . import runtime

    _runtime = runtime
    return runtime.get_generator()


def generate() -> int:
    """The next ID from the process-local generator (the default of every Snowflake field)."""
    # The current generator is read from the runtime each time: a settings change or reset()
    # replaces it. The first call, or one after a reset, builds it through get_generator().
    runtime = _runtime
    generator: SnowflakeGenerator | None = None if runtime is None else runtime._generator
    if generator is None:
        return get_generator().next_id()
    # SnowflakeGenerator.next_id(), inlined: calling next_id() would add a fifth to the cost
    # of an ID. Keep the two identical; the comments there say why it is safe.
    now = time.time_ns()
    if generator._window_start <= now < generator._window_end:
        ids = generator._ids
        value = next(ids, 0)
        if value and generator._ids is ids:
            return value
    generator._check_fork()
    try:
        with generator._lock:
            if not generator.closed:
                return generator._next_slow()
    finally:
        if generator._events:  # what it saw inside the ID, told once the lock is released
            generator._report()
    # A reset closed the generator read above: its successor issues.
    return get_generator().next_id()


def generate_many(n: int) -> list[int]:
    """``n`` strictly increasing IDs from the process-local generator, under one lock."""
    runtime = _runtime
    if runtime is not None:
        generator: SnowflakeGenerator | None = runtime._generator
        if generator is not None and not generator.closed:
            with contextlib.suppress(GeneratorClosed):  # closed meanwhile by a reset
                return generator.next_ids(n)
    return get_generator().next_ids(n)


def decode(value: int | str) -> SnowflakeParts:
    """The fields of an ID under the configured layout.

    Accepts an ``int`` or a string of digits; raises
    :class:`~django_snowflake.exceptions.InvalidSnowflake` (a ``ValueError``) otherwise.
    """
    from .conf import get_layout

    return get_layout().decompose(value)


def _aware(dt: datetime) -> datetime:
    from django.utils import timezone

    return timezone.make_aware(dt) if timezone.is_naive(dt) else dt


def min_id_for(dt: datetime) -> int:
    """The smallest ID that could carry time ``dt`` (naive: the current time zone).

    ``pk >= min_id_for(dt)`` selects rows created at or after ``dt``'s time unit; before the
    epoch it is 0.
    """
    from .conf import get_layout

    return get_layout().min_id_for(_aware(dt))


def max_id_for(dt: datetime) -> int:
    """The largest ID that could carry time ``dt`` (naive: the current time zone)."""
    from .conf import get_layout

    return get_layout().max_id_for(_aware(dt))
