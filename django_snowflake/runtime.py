"""The process-local generator: built from the settings, reset after fork or a settings change.

This module owns the generator, so it listens for ``setting_changed`` itself (as
django-linear-migrations' cache owner does) and never imports the system checks: they import
the models, which import the package, which imports this module. ``AppConfig.ready()`` hands
it the checks' verdict instead (:func:`configure`), once per ``django.setup()``.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import request_started, setting_changed
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from django.utils.module_loading import import_string

from . import conf, signals
from .allocators.base import BaseAllocator, on_allocator_thread
from .generator import SnowflakeGenerator

#: Judges ``settings.SNOWFLAKE``: the IDs of the errors that keep a generator from being built.
Validator = Callable[[], Sequence[str]]

_lock = threading.Lock()
_generator: SnowflakeGenerator | None = None
_validator: Validator | None = None
# The validator's verdict on the current settings; None until asked, and after they change.
_errors: tuple[str, ...] | None = None
logger = logging.getLogger("django_snowflake")


def configure(validator: Validator, *, claim: bool = False) -> None:
    """Judge the settings with ``validator`` and, when they are valid, build the generator.

    ``AppConfig.ready()`` calls it once per ``django.setup()``; the verdict is kept until the
    setting changes, so building never judges the settings a second time. ``claim`` claims
    the worker slot right after start-up if ``CLAIM_ON_READY`` asks for it
    (:func:`claim_after_start_up`). Raises nothing on bad settings:
    the system checks report them, and the first ID raises ``ImproperlyConfigured``.
    """
    global _validator, _errors
    _validator = validator
    _errors = tuple(validator())
    if _errors:
        return
    try:
        get_generator()  # built now, so the first request does not pay for it
    except ImproperlyConfigured:
        return  # the first ID raises it again, pointing at manage.py check
    if claim and conf.get_settings()["CLAIM_ON_READY"]:
        claim_after_start_up()


def claim_after_start_up() -> None:
    """``CLAIM_ON_READY``: claim the slot at the first request or the first database
    connection of the process, whichever comes first.

    Not in ``ready()`` itself: the apps are not ready there, and Django warns of any query
    ("Accessing the database during app initialization is discouraged"). A server makes its
    first connection or takes its first request right after start-up (``runserver`` checks
    its migrations, Celery's Django fix-up connects), so a claim that fails still fails
    before the first ID is needed.
    """
    for signal in (request_started, connection_created):
        signal.connect(_claim_once_ready, dispatch_uid=_CLAIM_AFTER_START_UP)


_CLAIM_AFTER_START_UP = "django_snowflake.claim_after_start_up"


def _claim_once_ready(**kwargs: Any) -> None:
    """Claim on the thread that sent the signal, never waiting for another claim or ID.

    A handler runs on whatever thread sends the signal, and ``connection_created`` comes
    from the claim itself: a first ID holds the generator and waits for the allocator's
    thread, which connects. A handler that waited for the generator there would wait for
    itself, so it does nothing on the allocator's threads, and claims only when no other
    thread holds the generator (that one claims for every thread). It never builds a
    generator either: the release at exit connects after the generator is gone.
    """
    if not apps.ready or on_allocator_thread():
        return  # another app's ready() connected, or the claim did: wait for the next signal
    for signal in (request_started, connection_created):
        signal.disconnect(dispatch_uid=_CLAIM_AFTER_START_UP)
    generator = _generator
    if generator is not None:
        generator.try_ensure_lease()


def settings_errors() -> tuple[str, ...]:
    """The IDs of the errors in the current settings, judged once (none without a validator)."""
    global _errors
    errors = _errors
    if errors is None:
        errors = _errors = () if _validator is None else tuple(_validator())
    return errors


def build() -> SnowflakeGenerator:
    """A new generator and allocator from ``settings.SNOWFLAKE``.

    Raises ``ImproperlyConfigured`` pointing at ``manage.py check`` when the settings are
    invalid (naming the failing checks), or when the allocator or generator refuse them.
    """
    errors = settings_errors()
    if errors:
        raise ImproperlyConfigured(
            f"SNOWFLAKE settings are invalid ({', '.join(errors)}). Run `python manage.py "
            "check` for the details and hints."
        )
    values = conf.get_settings()
    layout = conf.get_layout()
    try:
        path = conf.allocator_path(values)
        if not isinstance(path, str):
            raise TypeError(f"WORKER_ALLOCATOR must be a string, not {path!r}.")
        allocator: BaseAllocator = import_string(path)(layout, values)
        return SnowflakeGenerator(
            layout,
            lease_source=allocator,
            rollback=values["CLOCK_ROLLBACK"],
            max_rollback_ms=values["MAX_ROLLBACK_MS"],
            on_clock_sequence=allocator.persist_clock_sequence,
            on_event=send_event,
        )
    except ImproperlyConfigured:
        raise
    except Exception as exc:
        # What the checks passed, a constructor refused (a custom allocator, a settings
        # change the checks have not seen): say so in the checks' terms.
        raise ImproperlyConfigured(
            f"The Snowflake generator could not be built from SNOWFLAKE: {exc} Run `python "
            "manage.py check` for the details and hints."
        ) from exc


def send_event(name: str, facts: dict[str, Any]) -> None:
    """The generator's events, as the signals of the same name (``generator_waited``,
    ``clock_moved_backwards``). A receiver that raises is logged: the ID was issued."""
    signal = getattr(signals, name)
    for heard_by, result in signal.send_robust(sender=SnowflakeGenerator, **facts):
        if isinstance(result, Exception):
            logger.error("Receiver %r of %s raised", heard_by, name, exc_info=result)


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


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _errors
    if setting == "SNOWFLAKE":
        _errors = None
        reset()


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
