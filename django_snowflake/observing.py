"""What a generator tells those who watch it, without slowing an ID: how many IDs it issued
and how long it waited inside them (counted, never per fast-path ID), which time units it used
in its slot, when its lease runs out, and the events it noted under its lock, handed to its ``on_event`` callback once the lock is
released (the runtime turns them into :mod:`django_snowflake.signals`). Imports nothing from
Django, like the generator that inherits it (:class:`Observed`)."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .leases import UsedTime

if TYPE_CHECKING:
    import threading

    from .layout import BitLayout
    from .leases import Lease

#: The fast path's iterator while no window is open: spent.
SPENT: Iterator[int] = iter(())


class Observed:
    """The watched part of :class:`~django_snowflake.generator.SnowflakeGenerator`."""

    layout: BitLayout
    lease: Lease | None
    rollback: str
    _on_event: Callable[[str, dict[str, object]], object] | None
    _events: list[tuple[str, dict[str, object]]]
    _stepped_from: int
    _ids: Iterator[int]
    _armed: int
    _issued: int
    _waits: dict[str, list[float]]
    _limit: int
    _max_time: int
    _high: int
    _last: int
    _seq: int
    _active_lo: int
    _used: UsedTime | None
    _lock: threading.Lock

    def now(self) -> int:
        raise NotImplementedError

    def _disarm(self) -> None:
        raise NotImplementedError

    def _arm(self) -> None:
        raise NotImplementedError

    def used_time(self) -> UsedTime:
        """What this generator used in its slot (outside test mode: one spent span, from
        the first unit of the lease to the last)."""
        with self._lock:
            self._disarm()
            used = self._used_so_far()
            self._arm()
            return used

    def _used_so_far(self) -> UsedTime:
        """:meth:`used_time`, with the window closed; lock held."""
        used = self._used.copy() if self._used is not None else UsedTime()
        if self._used is not None:
            if self._last >= 0:
                used.note(self._last, self._seq)
        elif self._high >= self._active_lo:
            used.spend(self._active_lo, self._high)
        return used

    def _watched_by(self, on_event: Callable[[str, dict[str, object]], object] | None) -> None:
        """Start the counts and the events' queue (the generator's constructor)."""
        self._on_event = on_event
        # Events noted under the lock, for _report() once it is released.
        self._events = []
        self._stepped_from = -1  # the _high of the last step back noted: once per step
        # IDs issued: _issued counts those of the slow path and of closed windows; _armed is
        # how many the open window's iterator held when it was armed (see issued).
        self._issued = 0
        self._armed = 0
        # Waits inside IDs: cause -> [count, seconds] (see waits); every key there from the
        # start, so that a reader without the lock never sees the dict grow.
        self._waits = {cause: [0, 0.0] for cause in ("sequence", "clock", "lease")}

    def _acquire(self) -> None:
        raise NotImplementedError

    @property
    def issued(self) -> int:
        """How many IDs this generator issued (what the metrics count), read without the lock:
        while another thread issues, a value a few IDs off. Counted per slow-path ID and per
        fast-path window as it closes, never per fast-path ID (the window's progress is what
        its iterator no longer holds); an ID that a thread drops in a race with the window's
        closing (rule 4 above :meth:`next_id`) is spent, never issued again, and counted."""
        ids, armed, issued = self._ids, self._armed, self._issued
        if ids is SPENT:
            return issued
        return issued + armed - operator.length_hint(ids)

    @property
    def waits(self) -> dict[str, tuple[int, float]]:
        """The waits inside IDs so far, by cause (``"sequence"``, ``"clock"``, ``"lease"``):
        how many and their seconds (what the metrics count, as :attr:`issued`)."""
        return {cause: (int(count), total) for cause, (count, total) in self._waits.items()}

    @property
    def lease_limit_ms(self) -> int | None:
        """When (ms since 1970) this generator stops issuing unless its lease is extended;
        ``None`` without a lease, or under one without end (the static allocator's). Read
        without the lock, so that a probe or a scrape never waits for an ID."""
        limit = self._limit  # raised by extend() without a new Lease object
        if self.lease is None or limit < 0 or limit > self._max_time:
            return None
        return self.layout.unit_start_ms(limit)

    def lease_seconds_left(self) -> float | None:
        """Seconds until :attr:`lease_limit_ms` by the generator's clock (``None``: no end)."""
        limit_ms = self.lease_limit_ms
        return None if limit_ms is None else (limit_ms - self.now()) / 1000

    def _note(self, name: str, **facts: object) -> None:
        """Keep an event for :meth:`_report` (lock held); nothing without ``on_event``."""
        if self._on_event is not None:
            facts["generator"] = self
            self._events.append((name, facts))

    def _report(self) -> None:
        """Hand the events noted to ``on_event``, the lock released (an ID's caller or a
        receiver of it may itself ask for an ID)."""
        events, self._events = self._events, []
        for name, facts in events:
            self._on_event(name, facts)  # type: ignore[misc]

    def _stepped(self, behind: int, action: str) -> None:
        """Note a step back of the clock by ``behind`` ms and the ``action`` taken, once per
        step (not once per ID while the clock is behind)."""
        if self._stepped_from != self._high:
            self._stepped_from = self._high
            self._note(
                "clock_moved_backwards", behind_ms=behind, policy=self.rollback, action=action
            )

    def _acquire_inside_id(self) -> None:
        """:meth:`_acquire` for an ID that cannot go on without a lease: a wait, counted."""
        started = time.perf_counter()
        try:
            self._acquire()
        finally:
            self._waited("lease", time.perf_counter() - started)

    def _waited(self, cause: str, seconds: float) -> None:
        """Count a wait inside an ID and note it for ``on_event`` (lock held)."""
        counted = self._waits[cause]
        counted[0] += 1
        counted[1] += seconds
        self._note("generator_waited", cause=cause, seconds=seconds)
