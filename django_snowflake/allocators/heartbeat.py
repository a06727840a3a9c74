"""The lease's heartbeat: a thread per process that renews the lease every third of
``LEASE_SECONDS`` on a connection of its own, and moves the key clocks of the databases whose
clocks the processes move (MariaDB's column default) once a second."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import DatabaseError, connections

from .. import signals
from ..vendors import database_class
from .base import THREAD_PREFIX

if TYPE_CHECKING:
    import weakref

    from ..generator import Lease, SnowflakeGenerator

logger = logging.getLogger("django_snowflake")

T = TypeVar("T")

#: Seconds between two moves of MariaDB's key sequences by a process's heartbeat, and after
#: a move that could not reach a database (a failover: the new primary's raw INSERTs
#: repeat the old primary's lost keys until the first move there).
CLOCK_SECONDS = 1.0
CLOCK_RETRY_SECONDS = 0.1


class Heartbeat:
    """The heartbeat part of :class:`~.database.DatabaseAllocator`."""

    alias: str
    lease_seconds: int
    _heartbeat: threading.Thread | None
    _stop: threading.Event
    _state: Any
    _lease: Lease | None
    _generator: weakref.ref[SnowflakeGenerator] | None

    def _renew(self, generator: SnowflakeGenerator, lease: Lease) -> int | None:
        raise NotImplementedError

    def _signal_loss(self) -> None:
        """Send ``lease_lost`` for the lease :meth:`_renew` found lost."""
        raise NotImplementedError

    def _start_heartbeat(self) -> None:
        if self._heartbeat is not None and self._heartbeat.is_alive():
            return
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._beat, name=f"{THREAD_PREFIX}heartbeat", daemon=True
        )
        self._heartbeat.start()

    def _beat(self) -> None:
        interval = self.lease_seconds / 3
        due = time.monotonic() + interval
        # MariaDB's key sequences follow the clock by these beats (database_keys), once a
        # second, the first at once: a process starting after an idle pause brings their lag
        # back with its claim, not a second later. The lease is renewed when due.
        clocks = any(database_class(connection).moves_clock for connection in connections.all())
        tick = 0.0
        failures = 0  # renewals failed in a row
        while not self._stop.wait(
            min(tick, due - time.monotonic()) if clocks else due - time.monotonic()
        ):
            if clocks:
                tick = CLOCK_RETRY_SECONDS if _move_clocks() else CLOCK_SECONDS
            if time.monotonic() < due:
                continue
            generator = self._generator() if self._generator is not None else None
            with self._state:
                lease = self._lease
            if generator is None or lease is None:
                return
            try:
                limit = with_connection(
                    self.alias, functools.partial(self._renew, generator, lease)
                )
            except (DatabaseError, RuntimeError) as exc:
                if isinstance(exc, RuntimeError) and not blocked(exc):
                    raise
                # The database is away, or a test runner blocks it between the tests that
                # use it: retry each second; the generator stops at its limit.
                logger.log(
                    logging.DEBUG if isinstance(exc, RuntimeError) else logging.WARNING,
                    "Worker lease renewal failed (retrying each second): %s",
                    exc,
                )
                failures += 1
                signals.lease_renewal_failed.send(type(self), worker_id=lease.worker_id, database=self.alias, error=exc, seconds_left=generator.lease_seconds_left())  # fmt: skip
                interval = min(interval, 1.0)
                due = time.monotonic() + interval
                continue
            interval = self.lease_seconds / 3
            due = time.monotonic() + interval
            if limit is None:
                logger.warning("Worker lease of slot %s was lost", lease.worker_id)
                generator.revoke(lease)
                self._signal_loss()  # after the revoke: the signal says no ID is issued under it
                return
            generator.extend(lease, limit)
            signals.lease_renewed.send(type(self), worker_id=lease.worker_id, database=self.alias, seconds_left=generator.lease_seconds_left(), late=failures > 0, failures=failures)  # fmt: skip
            failures = 0


def _move_clocks() -> bool:
    """Move MariaDB's key sequences (:func:`~django_snowflake.database_keys.move_database_clocks`);
    whether a database could not be reached. A test runner's refusal of database access
    leaves them to the next beat."""
    from ..database_keys import move_database_clocks

    try:
        return move_database_clocks()
    except RuntimeError as exc:
        if not blocked(exc):
            raise
        return False


def blocked(error: RuntimeError) -> bool:
    """Whether ``error`` is pytest-django's refusal of database access outside the tests
    that ask for it (it raises RuntimeError, not a DatabaseError)."""
    return "Database access not allowed" in str(error)


def with_connection(alias: str, function: Callable[[], T]) -> T:
    """Run ``function`` on this thread's connection, closed afterwards.

    A claim or renewal comes every ``LEASE_SECONDS / 3`` at most, so a connection kept open
    between them would only hold the database: a test runner could not drop its test
    database ("being accessed by other users"), and an idle server would count it.
    """
    try:
        return function()
    finally:
        connections[alias].close()
