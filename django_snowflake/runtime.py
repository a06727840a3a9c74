"""The process-local generator: built from the settings, reset after fork or a settings change."""

from __future__ import annotations

import atexit
import functools
import os
import threading

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from . import conf
from .allocators.base import BaseAllocator
from .generator import SnowflakeGenerator

_lock = threading.Lock()
_generator: SnowflakeGenerator | None = None


def build() -> SnowflakeGenerator:
    """A new generator and allocator from ``settings.SNOWFLAKE``.

    Raises ``ImproperlyConfigured`` naming the failing checks when the settings are invalid.
    """
    from .checks import settings_errors

    errors = settings_errors()
    if errors:
        raise ImproperlyConfigured(
            f"SNOWFLAKE settings are invalid ({', '.join(errors)}). Run `python manage.py "
            "check` for the details and hints."
        )
    values = conf.get_settings()
    layout = conf.get_layout()
    name = values["WORKER_ALLOCATOR"]
    allocator: BaseAllocator = import_string(conf.ALLOCATORS.get(name, name))(layout, values)
    return SnowflakeGenerator(
        layout,
        lease_source=allocator,
        rollback=values["CLOCK_ROLLBACK"],
        max_rollback_ms=values["MAX_ROLLBACK_MS"],
        on_clock_sequence=allocator.persist_clock_sequence,
    )


def get_generator() -> SnowflakeGenerator:
    """The process-local generator, built on first use; see :func:`build` for errors."""
    global _generator
    generator = _generator
    if generator is None:
        with _lock:
            if _generator is None:
                _generator = build()
            generator = _generator
    return generator


def allocator() -> BaseAllocator | None:
    """The allocator of the current generator, if one is built."""
    generator = _generator
    return None if generator is None else generator.lease_source  # type: ignore[return-value]


def reset() -> None:
    """Release the worker slot and forget the generator; the next ID builds a new one."""
    global _generator
    with _lock:
        generator, _generator = _generator, None
    if generator is not None and isinstance(generator.lease_source, BaseAllocator):
        generator.lease_source.close()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    current = allocator()
    if current is not None:
        current.after_fork_in_child()


@functools.cache
def install_process_hooks() -> None:
    """Release the slot at a clean exit; let a forked child claim its own slot. Runs once."""
    atexit.register(reset)
    os.register_at_fork(after_in_child=_after_fork_in_child)
