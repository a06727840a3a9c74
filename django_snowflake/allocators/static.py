"""Allocators whose worker ID is fixed by configuration: ``static`` and ``hostname``."""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.core.checks import CheckMessage, Error
from django.utils.translation import gettext_lazy as _

from ..conf import WORKER_ID_ENV, configured_worker_id
from ..exceptions import GeneratorClosed, WorkerLeaseLost
from ..generator import Lease, UsedTime, fake_time_loaded
from .base import BaseAllocator, is_int, settings_message

if TYPE_CHECKING:
    from ..generator import SnowflakeGenerator
    from ..layout import BitLayout

_ORDINAL = re.compile(r"-(\d+)$")

# What the closed generators of this process used, per (worker ID, datacenter ID, layout
# fingerprint), and whether one of them was in test mode. A new generator for the same slot
# issues outside it; nothing else remembers it, and a reset (settings change, the
# snowflake_clock fixture's teardown) must not forget it.
_used_lock = threading.Lock()
_used: dict[tuple[int, int, str], tuple[UsedTime, bool]] = {}


class StaticAllocator(BaseAllocator):
    """The worker ID from ``SNOWFLAKE["WORKER_ID"]`` or ``$SNOWFLAKE_WORKER_ID``.

    Nothing coordinates it: every process must be given its own ID. A fork of the process
    that built the allocator refuses to issue IDs rather than share the parent's worker ID.
    """

    name = "static"

    @classmethod
    def check(
        cls, settings: Mapping[str, Any], layout: BitLayout | None, **kwargs: Any
    ) -> list[CheckMessage]:
        return [*super().check(settings, layout, **kwargs), *cls.check_worker_id(settings, layout)]

    @classmethod
    def check_worker_id(
        cls, settings: Mapping[str, Any], layout: BitLayout | None
    ) -> list[CheckMessage]:
        """E031, E032: what :meth:`resolve_worker_id` would refuse, or the layout not hold."""
        worker_id = configured_worker_id(settings)
        if worker_id is None:
            return [
                settings_message(
                    Error,
                    "E031",
                    _("The static allocator needs a worker ID, and none is set."),
                    _(
                        'Set SNOWFLAKE["WORKER_ID"] or the %(variable)s environment variable, '
                        "different in every process."
                    ),
                    variable=WORKER_ID_ENV,
                )
            ]
        if is_int(worker_id) and (layout is None or 0 <= worker_id <= layout.max_worker_id):
            return []
        source = "WORKER_ID" if settings["WORKER_ID"] is not None else f"${WORKER_ID_ENV}"
        if is_int(worker_id):
            assert layout is not None
            msg = _("The worker ID %(value)s (from %(source)s) is outside 0..%(max)s.")
            hint = _("The layout has %(bits)s worker bits; choose an ID in range.")
        else:
            msg = _("The worker ID %(value)s (from %(source)s) must be an integer.")
            hint = _(
                'Write it as a number without quotes: SNOWFLAKE["WORKER_ID"] = 3, or '
                "%(variable)s=3 in the environment."
            )
        return [
            settings_message(
                Error,
                "E032",
                msg,
                hint,
                value=repr(worker_id),
                source=source,
                max=None if layout is None else layout.max_worker_id,
                bits=None if layout is None else layout.worker_bits,
                variable=WORKER_ID_ENV,
            )
        ]

    def __init__(self, layout: BitLayout, settings: Mapping[str, Any]) -> None:
        super().__init__(layout, settings)
        self.worker_id = self.resolve_worker_id()
        self.datacenter_id: int = settings["DATACENTER_ID"]
        self._owner_pid = os.getpid()
        self._closed = False
        self._generator: weakref.ref[SnowflakeGenerator] | None = None

    def resolve_worker_id(self) -> int:
        worker_id = configured_worker_id(self.settings)
        if not isinstance(worker_id, int):
            raise ValueError(f"The static allocator needs an integer WORKER_ID, got {worker_id!r}")
        return worker_id

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        if os.getpid() != self._owner_pid:
            if not parallel_test_worker():
                raise WorkerLeaseLost(
                    WorkerLeaseLost.FORKED,
                    worker_id=self.worker_id,
                    parent_pid=self._owner_pid,
                )
            # A worker of Django's parallel test runner, forked after the parent built the
            # generator: it runs on its own clone of every test database, so sharing the
            # worker ID cannot put one ID in two rows of a table (as under pytest-xdist).
            # It keeps the parent's record of used time, and owns the allocator from here.
            self._owner_pid = os.getpid()
        if self._closed:
            raise GeneratorClosed(worker_id=self.worker_id)
        self._generator = weakref.ref(generator)
        with _used_lock:
            used, test_mode = _used.get(self._slot_key(), (UsedTime(), False))
            if test_mode or generator.test_mode or fake_time_loaded():
                return Lease(self.worker_id, datacenter_id=self.datacenter_id, history=used.copy())
            # Outside tests the clock only moves forward: issuing above the last unit suffices.
            return Lease(self.worker_id, datacenter_id=self.datacenter_id, floor=used.top())

    def close(self) -> None:
        """Close the generator (it never issues again) and remember the time it used."""
        self._closed = True
        generator = self._generator() if self._generator is not None else None
        if generator is None or os.getpid() != self._owner_pid:
            return
        generator.relinquish(final=True)
        used = generator.used_time()
        with _used_lock:
            previous, test_mode = _used.get(self._slot_key(), (UsedTime(), False))
            previous.merge(used)
            _used[self._slot_key()] = (previous, test_mode or generator.test_mode)

    def _slot_key(self) -> tuple[int, int, str]:
        return (self.worker_id, self.datacenter_id, self.layout.fingerprint)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "worker_id": self.worker_id}


def parallel_test_worker() -> bool:
    """Whether this process is a worker of Django's ``manage.py test --parallel``, which
    gives each worker its own test databases (``django.test.runner._worker_id`` is set in
    the worker only)."""
    runner = sys.modules.get("django.test.runner")
    return bool(getattr(runner, "_worker_id", 0))


def hostname_ordinal(hostname: str) -> int | None:
    """The trailing ordinal of a StatefulSet pod name (``web-3`` -> 3), or ``None``."""
    match = _ORDINAL.search(hostname)
    return int(match.group(1)) if match else None


def current_hostname() -> str:
    return os.environ.get("HOSTNAME") or socket.gethostname()


class HostnameAllocator(StaticAllocator):
    """The worker ID from the trailing ordinal of the host name (Kubernetes StatefulSets)."""

    name = "hostname"

    @classmethod
    def check_worker_id(
        cls, settings: Mapping[str, Any], layout: BitLayout | None
    ) -> list[CheckMessage]:
        """E038: the host name carries no worker ID in the layout's range."""
        if layout is None:
            return []
        hostname = current_hostname()
        ordinal = hostname_ordinal(hostname)
        if ordinal is not None and ordinal <= layout.max_worker_id:
            return []
        return [
            settings_message(
                Error,
                "E038",
                _("The host name %(hostname)s has no trailing ordinal in 0..%(max)s."),
                _(
                    "The hostname allocator reads StatefulSet pod names such as web-3; use "
                    'WORKER_ALLOCATOR = "database" elsewhere.'
                ),
                hostname=repr(hostname),
                max=layout.max_worker_id,
            )
        ]

    def resolve_worker_id(self) -> int:
        hostname = current_hostname()
        ordinal = hostname_ordinal(hostname)
        if ordinal is None:
            raise ValueError(f"The host name {hostname!r} does not end in -<ordinal>")
        return ordinal
