"""The Snowflake generator: thread-safe, fork-safe, with five clock-rollback policies.

This module imports nothing from Django. A generator either has a fixed worker ID or takes
its worker slot from a *lease source* (an allocator), which it asks for a lease on first use,
when the lease runs out and after ``fork()``. The uniqueness argument rests on three rules:

* inside one worker slot, a (time unit, sequence) pair is issued at most once per clock
  sequence value: ``_high`` is the highest unit used, any unit above it is fresh;
* a lease carries a *floor* (issue only above it: the previous holders' reserved time) and a
  *limit* (issue only below it: this holder's reservation, persisted before it is used);
* after ``fork()`` the child drops the lease, so parent and child never share a slot.

Test suites move the system clock (freezegun, time-machine, the ``snowflake_clock`` fixture),
which no rule above allows. A generator in *test mode* therefore keeps the last sequence of
every time unit it used in its slot (:class:`~django_snowflake.leases.UsedTime`) and, when
the system clock goes back or stands still, goes on in the clock's unit or, that unit spent,
the next one with sequence left (DESIGN section 5, "Frozen clocks"). Test mode starts when the
lease says so (the static allocator does when freezegun or time-machine is loaded: no
production process imports them) or a test clock is put under the generator; it costs the
real clock's fast path nothing.

What an allocator hands a generator (``Lease``, ``UsedTime``) is in :mod:`~django_snowflake.leases`.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol

from .exceptions import ClockMovedBackwards, ClockOutsideLifespan, GeneratorClosed, WorkerLeaseLost
from .forking import LIVE, Forkable
from .layout import BitLayout
from .leases import Lease as Lease
from .leases import Ring
from .leases import UsedTime as UsedTime
from .leases import fake_time_loaded as fake_time_loaded
from .observing import SPENT, Observed

Clock = Callable[[], int]
Sleep = Callable[[float], None]

POLICIES = ("raise", "wait", "borrow", "clock_sequence", "ring")

# The fast path hands out IDs with next() on a range iterator: one call into C, which no
# other thread can interleave while the GIL is held. A free-threaded interpreter gives no
# such guarantee, so there every ID takes the lock.
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


def system_clock() -> int:
    """Milliseconds since 1970 from the system's real-time clock."""
    return time.time_ns() // 1_000_000


def precise_sleep(seconds: float, _perf_counter: Callable[[], float] = time.perf_counter) -> None:
    """Sleep ``seconds``, spinning for the last millisecond: ``time.sleep`` overshoots by
    50-100 µs, which would cost a 1 ms-unit layout several percent of its throughput."""
    # The real perf_counter, bound as a default: freezegun replaces ``time.perf_counter``, and
    # every module attribute holding it, with a frozen one on which this spin never ends.
    deadline = _perf_counter() + seconds
    if seconds > 0.002:
        time.sleep(seconds - 0.001)
    while _perf_counter() < deadline:
        pass


class LeaseSource(Protocol):
    """What a generator needs from an allocator."""

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        """Renew the generator's current lease or claim a fresh slot; raise if neither works."""
        ...


class SnowflakeGenerator(Forkable, Observed):
    """Issues unique, time-ordered 64-bit IDs for one worker slot at a time.

    Give either ``worker_id`` (a fixed slot, for scripts and tests) or ``lease_source`` (an
    allocator that leases slots). ``clock`` returns int milliseconds since 1970 and ``sleep``
    waits a number of seconds; inject both together to drive time in tests.
    ``rollback`` is one of :data:`POLICIES`, bounded by ``max_rollback_ms``.
    ``on_clock_sequence(value)`` is called with each new clock-sequence value before any ID
    uses it (the ``clock_sequence`` policy); if it raises, no ID is issued.
    ``on_event(name, facts)`` hears of what happened inside an ID (``"generator_waited"``,
    ``"clock_moved_backwards"``, with ``facts`` as :mod:`django_snowflake.signals` documents
    them), called after the generator released its lock, on the thread of that ID.

    Raises ``ValueError`` for a worker or datacenter ID outside the layout, an unknown policy,
    or the ``clock_sequence`` policy on a layout without clock-sequence bits.
    """

    def __init__(
        self,
        layout: BitLayout,
        worker_id: int | None = None,
        *,
        datacenter_id: int = 0,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        rollback: str = "wait",
        max_rollback_ms: int = 5,
        clock_sequence: int = 0,
        on_clock_sequence: Callable[[int], object] | None = None,
        lease_source: LeaseSource | None = None,
        on_event: Callable[[str, dict[str, object]], object] | None = None,
    ) -> None:
        if rollback not in POLICIES:
            raise ValueError(f"Unknown rollback policy {rollback!r}; choose one of {POLICIES}")
        if rollback == "clock_sequence" and layout.clock_sequence_bits == 0:
            raise ValueError("The clock_sequence policy needs a layout with clock_sequence_bits")
        if isinstance(max_rollback_ms, bool) or not isinstance(max_rollback_ms, int):
            raise ValueError(f"max_rollback_ms must be an integer, got {max_rollback_ms!r}")
        if max_rollback_ms < 0:
            raise ValueError(f"max_rollback_ms must not be negative, got {max_rollback_ms}")
        if (worker_id is None) == (lease_source is None):
            raise ValueError("Give exactly one of worker_id and lease_source")
        self.layout = layout
        self.rollback = rollback
        self.max_rollback_ms = max_rollback_ms
        self._clock = clock or system_clock
        self._sleep = sleep or precise_sleep
        self._on_clock_sequence = on_clock_sequence
        self._watched_by(on_event)
        self.lease_source = lease_source
        self._owner_pid = os.getpid()
        # The process this state belongs to: the fork hook moves it to the child.
        self._pid = self._owner_pid
        self._lock = threading.Lock()
        # The thread that holds the lock while it calls the lease source or the clock-sequence
        # callback (try_ensure_lease: a hook that thread's queries fire must not wait for it).
        self._calling_out: int | None = None

        # Hot-path copies of the layout.
        self._epoch = layout.epoch_ms
        self._unit = layout.time_unit_ms
        self._epoch_ns = layout.epoch_ms * 1_000_000
        self._unit_ns = layout.time_unit_ms * 1_000_000
        self._time_shift = layout.time_shift
        self._max_seq = layout.max_sequence
        self._max_time = layout.max_time

        self.lease: Lease | None = None
        self.closed = False
        self.clock_sequence = 0
        self._node = 0  # datacenter, clock sequence and worker bits, ready to OR in
        self._high = -1  # highest time unit used under the current clock sequence
        self._last = -1  # time unit of _base
        self._seq = self._max_seq  # last sequence used in _last (max: nothing left)
        self._base = 0
        # The fast path's cache of the above (see next_id): while the system clock reads
        # [_window_start, _window_end), the nanoseconds of unit _last, it takes IDs from
        # _ids, the rest of that unit's sequence, with no arithmetic on the time and no lock.
        # _disarm() folds its progress back into _seq before anything else touches the
        # state; _window_end == 0 means closed.
        self._window_start = self._window_end = 0
        self._ids = SPENT
        self._limit = -1  # issue only time units below this
        # _issue() takes units above _high directly only below _bound: _limit once the
        # lease's first unit is started; -1 in test mode, where every unit is entered
        # through _enter(), which keeps _used (module doc).
        self._bound = -1
        self._used: UsedTime | None = None
        self._active_lo = 0  # the first unit used under the current lease
        # Test mode: the clock's unit when the generator last followed it (-1: not yet). A
        # clock at or above it but below _high has not gone back: the units between were
        # spent, or used by an earlier generator. Below it, a test clock was rewound.
        self._entry = -1
        self._slot: tuple[int, int] | None = None  # (worker, datacenter) of the last lease
        self._floor = -1  # the ring policy never rolls back to or below this unit
        self._ahead: tuple[int, int] | None = None  # Lease.ahead, until the clock catches up
        self._monotonic_ns = time.monotonic_ns
        self._ring = (
            Ring(max_rollback_ms // layout.time_unit_ms + 1) if rollback == "ring" else None
        )

        if worker_id is not None:
            self._install(
                Lease(worker_id, datacenter_id=datacenter_id, clock_sequence=clock_sequence)
            )
        LIVE.add(self)

    # Public state, for show_worker and the allocators.

    @property
    def worker_id(self) -> int | None:
        return None if self.lease is None else self.lease.worker_id

    @property
    def datacenter_id(self) -> int | None:
        return None if self.lease is None else self.lease.datacenter_id

    @property
    def last_timestamp(self) -> int:
        """The highest time unit this generator has used (-1 before the first ID)."""
        return self._high

    @property
    def test_mode(self) -> bool:
        """Whether the generator keeps what it used, for clocks that tests move."""
        return self._used is not None

    def now(self) -> int:
        """The generator's clock, in milliseconds since 1970."""
        return self._clock()

    def ensure_lease(self) -> Lease:
        """Acquire a lease now unless one is held (eager claims, ``show_worker``)."""
        with self._lock:
            if self.lease is None:
                self._acquire()
            assert self.lease is not None
            return self.lease

    def try_ensure_lease(self, *, wait: bool = False) -> Lease | None:
        """:meth:`ensure_lease` for hooks (signal handlers, a cursor), which run on whatever
        thread fired them and so must never wait on themselves.

        The generator holds its lock while it calls its lease source or clock-sequence
        callback, which may make queries (on this thread, or on the allocator's, waited for
        here), and a query may fire a hook. So this returns ``None`` at once on the thread
        making such a call (the claim in flight is that thread's own), when the generator is
        closed, and, unless ``wait``, when another thread holds the generator (issuing an ID
        or claiming a slot, which it does for every thread); else the lease, claimed if need
        be. Raises what :meth:`ensure_lease` raises.
        """
        if self.closed or self._calling_out == threading.get_ident():
            return None
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            if self.lease is None and not self.closed:
                self._acquire()
            return self.lease
        finally:
            self._lock.release()

    def use_clock(self, clock: Clock, sleep: Sleep) -> tuple[Clock, Sleep]:
        """Swap in another clock and sleep (see :mod:`django_snowflake.testing`); returns the
        previous pair."""
        with self._lock:
            saved = self._clock, self._sleep
            self._clock, self._sleep = clock, sleep
            self._disarm()  # the fast path reads the system clock
            self._entry = -1  # another clock: it has not gone back yet
            if clock is not system_clock and self._used is None:
                # A test drives time: the system clock will be behind it afterwards. What the
                # lease used so far is one spent span.
                self._used = self._used_so_far()
                if self._used.spans:
                    self._seq = self._max_seq
                self._rebound()
            return saved

    # Issuing IDs.

    # The lock-free fast path: the first six lines of next_id(), copied into
    # django_snowflake.generate() (test_fast_path.py pins the copy to these lines). Every
    # rule it relies on:
    #
    # 1. The window is unit _last, in system-clock nanoseconds: [_window_start, _window_end).
    #    _arm() opens it only on the real system clock (an injected clock, or a frozen one,
    #    reads the slow path), only with the GIL (next() on a range iterator is then one
    #    call into C that no thread can interleave; free-threaded builds take the lock for
    #    every ID) and only while _last has sequence left. Under `ring` (and in test mode)
    #    _last may be below _high: the window sits on that revisited unit, whose remaining
    #    sequences the iterator holds, so it goes on there while the clock reads it.
    # 2. _ids holds exactly the IDs of _last not issued yet, in order; the window is only a
    #    hint to try it. An ID is valid because next() handed it to one caller, never
    #    because of the clock: a torn read of the two window bounds (another thread arming
    #    or disarming between them) can only send a caller to the lock, or let it take an
    #    ID of _last while the clock reads a neighbouring unit, which is still unique and
    #    below the lease's limit (the slow path checked it before it armed).
    # 3. next(ids, 0) may use 0 as "empty": the iterator starts at _base + _seq + 1 >= 1.
    # 4. _disarm() swaps _ids for an empty iterator before it counts what is left of the
    #    old one (operator.length_hint, exact for range iterators: an estimate could
    #    re-issue an ID). A caller that took an ID from the old iterator after the swap
    #    finds `self._ids is not ids` and drops it: that ID was counted as used and is
    #    never returned. Counting first would let that caller return an ID the count gave
    #    back to the sequence (test_fast_path.py forces that interleaving).
    # 5. Every change of state that the window's IDs depend on (a new unit, a lease, a
    #    clock, a close) happens under the lock after _disarm(), so the slow path always
    #    sees _seq with the fast path's progress folded in.
    def next_id(self) -> int:
        """Return the next ID.

        Waits (never raises) when the sequence of the current time unit is spent. Raises
        :class:`ClockMovedBackwards` past the rollback policy's bound,
        :class:`ClockOutsideLifespan` before the epoch or after the layout's lifespan, and
        whatever the lease source raises when it can neither renew nor claim a slot.
        """
        # The fast path (the rules above); django_snowflake.generate() has a copy.
        now = time.time_ns()
        if self._window_start <= now < self._window_end:
            ids = self._ids
            value = next(ids, 0)
            if value and self._ids is ids:
                return value
        self._check_fork()  # before the lock, which a thread of a parent may hold
        try:
            with self._lock:
                return self._next_slow()
        finally:
            if self._events:
                self._report()

    def next_ids(self, n: int) -> list[int]:
        """Return ``n`` strictly increasing IDs, taken under one lock acquisition.

        The IDs of one time unit are consecutive integers, so a batch costs little more
        than the number of time units it spans.
        """
        if n < 0:
            raise ValueError(f"n must not be negative, got {n}")
        ids: list[int] = []
        reordered = False
        self._check_fork()
        with self._lock:
            self._disarm()
            while len(ids) < n:
                first = self._issue()
                # The ring and clock_sequence policies may go back in time mid-batch.
                reordered = reordered or (bool(ids) and first < ids[-1])
                take = min(n - len(ids) - 1, self._max_seq - self._seq)
                ids.append(first)
                if take > 0:
                    ids.extend(range(first + 1, first + 1 + take))
                    self._seq += take
            self._issued += len(ids)
            self._arm()
        if self._events:
            self._report()
        if reordered:
            ids.sort()
        return ids

    def _next_slow(self) -> int:
        """Every case the fast path does not cover; called with the lock held."""
        self._disarm()
        value = self._issue()
        self._issued += 1
        self._arm()
        return value

    def _disarm(self) -> None:
        """Fold the fast path's progress into ``_seq`` and close its window (lock held)."""
        if self._window_end:
            # Swap, then count (rule 4 above next_id).
            ids, self._ids = self._ids, SPENT
            self._window_start = self._window_end = 0
            left = operator.length_hint(ids)
            self._seq = self._max_seq - left
            self._issued += self._armed - left

    def _arm(self) -> None:
        """Open the fast path's window on unit ``_last`` if it has sequence left (lock held).

        Only on the system clock: an injected clock is read by the slow path alone.
        """
        if _GIL and self._clock is system_clock and self._seq < self._max_seq:
            self._armed = self._max_seq - self._seq
            self._ids = iter(range(self._base + self._seq + 1, self._base + self._max_seq + 1))
            self._window_start = self._last * self._unit_ns + self._epoch_ns
            self._window_end = self._window_start + self._unit_ns

    def _issue(self) -> int:
        """The next ID by the full rules, with the window closed; lock held (taken after the
        hookless-fork check)."""
        while True:
            if self.lease is None:
                self._acquire_inside_id()
            now = self._clock()
            t = (now - self._epoch) // self._unit
            if t < 0 or t > self._max_time:
                raise ClockOutsideLifespan(
                    now, epoch=self.layout.epoch_datetime, end=self.layout.lifespan_end
                )
            if t > self._high:
                if self._ahead is not None:
                    self._ahead = None  # the clock caught up with the skip
                if t >= self._bound:
                    if t >= self._limit:
                        self._acquire_inside_id()
                        continue
                    self._entry = t
                    issued = self._enter(t)
                    if issued is None:
                        continue
                    return issued
                return self._start_unit(t)
            if t == self._last:
                if self._seq < self._max_seq:
                    self._seq += 1
                    return self._base | self._seq
                issued = self._exhausted(now)
            else:
                issued = self._behind(now, t)
            if issued is not None:
                return issued

    def _start_unit(self, t: int) -> int:
        if self._ring is not None:
            self._ring.note(self._last, self._seq)
        self._high = self._last = t
        self._seq = 0
        self._base = t << self._time_shift | self._node
        return self._base

    def _enter(self, u: int) -> int | None:
        """Issue in unit ``u`` (above ``_high``, below the limit, outside test mode); lock held.

        In test mode ``u`` may be any unit: the unit left is recorded in ``_used``, and a
        spent ``u`` gives way to the next unit with sequence left (None: the caller's loop
        goes on, to renew the lease first).
        """
        used = self._used
        if used is None:
            if self._high < self._active_lo:
                self._active_lo = u  # the first unit of this lease
            self._bound = self._limit
            return self._start_unit(u)
        if self._ring is not None:
            self._ring.note(self._last, self._seq)
        if self._last >= 0:
            used.note(self._last, self._seq)
        u = used.first_free(u, self._max_seq, stop=self._limit)  # the limit <= max time + 1
        if u > self._max_time:
            raise ClockOutsideLifespan(
                self.layout.unit_start_ms(u),
                epoch=self.layout.epoch_datetime,
                end=self.layout.lifespan_end,
            )
        if u >= self._limit:
            self._last, self._seq = -1, self._max_seq
            self._acquire_inside_id()  # renews the limit, or raises
            return None
        seq = used.units.pop(u, -1)
        self._high = max(self._high, u)
        self._last = u
        self._seq = seq + 1
        self._base = u << self._time_shift | self._node
        return self._base | self._seq

    def _rebound(self) -> None:
        self._bound = -1 if self._used is not None or self._high < self._active_lo else self._limit

    def _travel(self, t: int) -> int | None:
        """Test mode: the clock reads unit ``t``, below ``_high`` (lock held).

        Issues in ``t`` when this slot never used it here, else in the first unit from ``t``
        with sequence left: IDs never repeat, and their time is the clock's where it can be.
        """
        t = max(t, self._floor + 1)  # below the lease's floor, the time is other holders'
        if t == self._entry and self._last >= t:
            # The clock stands where it was (frozen): go on where the last ID was issued.
            if self._seq < self._max_seq:
                self._seq += 1
                return self._base | self._seq
            return self._step()
        self._entry = t
        return self._enter(t)

    def _step(self) -> int | None:
        """Test mode: the unit after ``_last``, the clock standing still."""
        return self._enter(self._last + 1)

    def _go_ahead(self) -> int | None:
        """The clock is behind a floor the lease skipped to (``Lease.ahead``): go on above it
        as a logical clock, a unit once the last is spent, never past the lease's bound plus
        the monotonic time since it was set (a clock stepped back changes nothing here)."""
        if self._seq < self._max_seq:
            self._seq += 1
            return self._base | self._seq
        bound, since = self._ahead  # type: ignore[misc]  # the caller checked it
        u = self._high + 1
        allowed = bound + (self._monotonic_ns() - since) // self._unit_ns
        if u >= self._limit:
            self._acquire_inside_id()  # renews the limit, or raises
            return None
        if u < allowed:
            return self._enter(u)
        seconds = (u - allowed + 1) * self._unit / 1000
        self._sleep(seconds)
        self._waited("sequence", seconds)
        return None

    def _exhausted(self, now: int) -> int | None:
        """The current unit's sequence is spent: borrow the next unit or wait for it."""
        if self.rollback == "borrow":
            next_start = self.layout.unit_start_ms(self._high + 1)
            if next_start - now <= self.max_rollback_ms and self._high + 1 < self._limit:
                return self._enter(self._high + 1)
            target = next_start - self.max_rollback_ms
        else:
            target = self.layout.unit_start_ms(self._last + 1)
        self._wait_until(target, now, "sequence")
        if self._used is not None and self._clock is system_clock and self._clock() < target:
            # The system clock did not move while we slept: frozen (freezegun, time-machine
            # with tick=False). The next unit would never come; take it, as a logical clock.
            return self._step()
        return None

    def _behind(self, now: int, t: int) -> int | None:
        """The clock reads a unit at or below ``_high`` other than the current one."""
        if self._ahead is not None:
            return self._go_ahead()
        if (
            self._used is not None
            and t > self._floor
            and (self._clock is system_clock or t >= self._entry)
        ):
            # A test moved the system clock (or let it go). A test clock's rewind goes to the
            # rollback policy, which the snowflake_clock fixture lets tests exercise.
            return self._travel(t)
        behind = self.layout.unit_start_ms(self._high) - now
        policy, ring = self.rollback, self._ring
        if ring is not None:  # the ring policy
            if t > self._floor and self._high - t < ring.size and t < self._limit:
                self._stepped(behind, "ring")
                ring.note(self._last, self._seq)
                if self._used is not None:
                    self._used.note(self._last, self._seq)
                self._active_lo = min(self._active_lo, t)
                self._last = t
                self._seq = ring.last_seq(t)
                self._base = t << self._time_shift | self._node
                return None  # the loop issues from this unit, or waits if it is spent
            policy = "wait"  # a unit of a previous holder, of which it has no record
        elif policy == "borrow":
            if behind <= self.max_rollback_ms:
                self._stepped(behind, "borrowed")
                if self._seq < self._max_seq:
                    self._seq += 1
                    return self._base | self._seq
                return self._exhausted(now)
        elif policy == "clock_sequence":
            if self.clock_sequence < self.layout.max_clock_sequence:
                self._stepped(behind, "clock_sequence")
                self._set_clock_sequence(self.clock_sequence + 1)
                self._active_lo = min(self._active_lo, t)
                self._high = self._last = t - 1
                self._seq = self._max_seq
                return None
            policy = "wait"  # every clock-sequence value is spent
        if policy == "wait" and behind <= self.max_rollback_ms:
            self._stepped(behind, "waited")
            self._wait_until(self.layout.unit_start_ms(self._last), now, "clock")
            return None
        self._stepped(behind, "raised")
        raise ClockMovedBackwards(
            behind, policy=self.rollback, max_rollback_ms=self.max_rollback_ms
        )

    def _wait_until(self, target_ms: int, now: int, cause: str) -> None:
        if self._clock is system_clock:
            # ``now`` is truncated to the millisecond: sleeping ``target_ms - now`` would
            # overshoot the boundary by up to a whole unit, idle time lost to a batch.
            seconds = max(target_ms * 1_000_000 - time.time_ns(), 1_000) / 1e9
        else:
            seconds = max(target_ms - now, 1) / 1000
        self._sleep(seconds)
        self._waited(cause, seconds)

    def _set_clock_sequence(self, value: int) -> None:
        if self._on_clock_sequence is not None:
            self._calling_out = threading.get_ident()
            try:
                self._on_clock_sequence(value)
            except WorkerLeaseLost:
                self._drop_lease()  # the slot is gone: the next ID claims a fresh one
                raise
            finally:
                self._calling_out = None
        self.clock_sequence = value
        self._node = self._node_bits()

    def _node_bits(self) -> int:
        layout, lease = self.layout, self.lease
        assert lease is not None
        return (
            lease.datacenter_id << layout.datacenter_shift
            | self.clock_sequence << layout.clock_sequence_shift
            | lease.worker_id << layout.worker_shift
        )

    # Leases.

    def _acquire(self) -> None:
        if self.closed:
            raise GeneratorClosed(worker_id=self._slot_worker_id())
        if self.lease_source is None:
            raise WorkerLeaseLost(
                WorkerLeaseLost.FORKED,
                worker_id=self._slot_worker_id(),
                parent_pid=self._owner_pid,
            )
        self._calling_out = threading.get_ident()
        try:
            lease = self.lease_source.acquire(self)
        finally:
            self._calling_out = None
        self._install(lease)

    def _slot_worker_id(self) -> int | None:
        """The worker ID of the last lease installed, for errors raised after it is dropped."""
        return None if self._slot is None else self._slot[0]

    def _install(self, lease: Lease) -> None:
        lease.check(self.layout)
        self._disarm()
        previous = self.lease
        same_slot = previous is not None and (previous.worker_id, previous.datacenter_id) == (
            lease.worker_id,
            lease.datacenter_id,
        )
        limit = self._max_time + 1 if lease.limit is None else min(lease.limit, self._max_time + 1)
        self.lease = lease
        self.clock_sequence = lease.clock_sequence
        self._node = self._node_bits()
        if same_slot:
            self._limit = max(self._limit, limit)
        else:
            self._limit = limit
            # What was used belongs to the slot: a new slot starts a new record.
            if lease.history is not None:
                used = lease.history.copy()
                if self._slot == (lease.worker_id, lease.datacenter_id):
                    # The slot again, after a fork: what the parent used counts too.
                    used.merge(self._used_so_far())
                self._used = used
            elif self._used is not None:
                self._used = UsedTime()
        self._slot = (lease.worker_id, lease.datacenter_id)
        if not same_slot or lease.floor > self._high:
            # A fresh slot: the unit at the floor (or our own last unit) counts as used.
            if self._used is not None and self._last >= 0:
                self._used.note(self._last, self._seq)
            self._high = self._last = max(self._high, lease.floor)
            self._seq = self._max_seq
            self._ahead = lease.ahead
            self._active_lo = self._high + 1
            if self._ring is not None:
                self._ring.clear()
            if lease.history is None:
                self._floor = self._high
            else:
                # _used says what this process spent; only the lease's floor is others'.
                # _high stays this generator's own: the history's units go through _enter(),
                # which skips what was used, and a clock rewound in a later test is measured
                # from where that test's clock was, not from where an earlier one left off.
                self._floor = lease.floor
                self._last = -1
        self._base = self._last << self._time_shift | self._node if self._last >= 0 else 0
        self._rebound()

    def extend(self, lease: Lease, limit: int) -> bool:
        """Raise the limit of ``lease`` once its new reservation is persisted.

        Returns False (and changes nothing) when ``lease`` is no longer the current one.
        """
        with self._lock:
            if self.lease is not lease:
                return False
            self._limit = max(self._limit, min(limit, self._max_time + 1))
            self._rebound()
            return True

    def revoke(self, lease: Lease) -> None:
        """Stop issuing under ``lease`` at once (it was lost); the next ID acquires afresh."""
        with self._lock:
            if self.lease is lease:
                self._drop_lease()

    def relinquish(self, *, final: bool = False) -> tuple[Lease | None, int]:
        """Stop issuing and return the lease held and the highest time unit used under it.

        ``final`` closes the generator: every later ID raises :class:`GeneratorClosed`. A
        thread that still holds it then cannot renew or claim a slot after the caller
        released this one below a time it went on to use (DESIGN section 4, "Closing").
        """
        with self._lock:
            self.closed = self.closed or final
            lease, high = self.lease, self.last_timestamp
            self._drop_lease()
            return lease, high

    def _drop_lease(self) -> None:
        self._disarm()
        if self._used is not None and self._last >= 0:
            self._used.note(self._last, self._seq)
            self._last = -1
        self.lease = None
        self._ahead = None
        self._limit = self._bound = -1
        self._seq = self._max_seq
