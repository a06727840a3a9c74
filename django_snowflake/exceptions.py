"""The package's own errors, each carrying the numbers that explain it.

Every one is a :class:`SnowflakeError`. Beyond these, invalid settings raise Django's ``ImproperlyConfigured`` (pointing at
``manage.py check``), and invalid arguments Python's ``ValueError`` or ``TypeError``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime


class SnowflakeError(Exception):
    """Base class of the errors in this module."""

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuilt from the message and the attributes, not through the constructor, whose
        # keyword-only numbers Exception's own pickling drops: an error must survive the trip
        # between processes (Django's parallel test runner, multiprocessing).
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[SnowflakeError], args: tuple[object, ...]) -> SnowflakeError:
    return cls.__new__(cls, *args)


class ClockMovedBackwards(SnowflakeError):
    """Raised when the clock went back further than the rollback policy tolerates."""

    def __init__(self, behind_ms: int, *, policy: str, max_rollback_ms: int) -> None:
        self.behind_ms = behind_ms
        self.policy = policy
        self.max_rollback_ms = max_rollback_ms
        why = {
            "raise": "which the 'raise' rollback policy never tolerates",
            "borrow": "more than the 'borrow' rollback policy runs ahead of it",
            "clock_sequence": (
                "with every clock-sequence value spent, and by more than the 'clock_sequence' "
                "rollback policy then waits out"
            ),
            "ring": (
                "to a time unit the 'ring' rollback policy holds no record of, and by more than "
                "the policy then waits out"
            ),
        }.get(policy, f"more than the {policy!r} rollback policy waits out")
        if policy != "raise":
            why += f" (MAX_ROLLBACK_MS = {max_rollback_ms})"
        super().__init__(
            f"The clock moved backwards by {behind_ms} ms, {why}. No ID was issued; retry "
            "once the clock has caught up, or fix the time source (NTP slewing, not stepping)."
        )


class ClockOutsideLifespan(SnowflakeError):
    """Raised when the clock is before the layout's epoch or past its lifespan end."""

    def __init__(self, now_ms: int, *, epoch: datetime, end: datetime) -> None:
        self.now_ms = now_ms
        self.epoch = epoch
        self.end = end
        reads = f"The clock reads {now_ms} ms since 1970"
        epoch_ms = int(epoch.timestamp() * 1000)
        if now_ms < epoch_ms:
            super().__init__(
                f"{reads} ({_iso(now_ms)}), before the layout's epoch {epoch.isoformat()}; no "
                "ID can be issued. A test that freezes or moves time there needs an earlier "
                'epoch in its test settings: SNOWFLAKE["EPOCH"] = '
                f'"{_iso(now_ms)[:4]}-01-01T00:00:00Z" or earlier (the test database only, '
                "never mixed with production IDs)."
            )
        else:
            super().__init__(
                f"{reads} ({_iso(now_ms)}), past the end of the layout's lifespan "
                f"({epoch.isoformat()} to {end.isoformat()}); no ID can be issued. A test that "
                "moves time there needs a later epoch in its test settings; a deployment needs "
                "a new layout with more TIME_BITS."
            )


def _iso(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"


class ClockOffsetTooLarge(SnowflakeError):
    """Raised when this server's clock and the database's differ by more than a lease allows."""

    def __init__(self, offset_ms: float, *, lease_seconds: int, margin_ms: int) -> None:
        self.offset_ms = offset_ms
        self.lease_seconds = lease_seconds
        self.margin_ms = margin_ms
        super().__init__(
            f"This server's clock is {offset_ms:+.0f} ms off the database's; a lease of "
            f"{lease_seconds} s tolerates {margin_ms} ms. Synchronise the clocks (NTP) or "
            "raise LEASE_SECONDS. No worker slot was claimed."
        )


class NoWorkerAvailable(SnowflakeError):
    """Raised when every worker slot of the layout is held by a live lease."""

    def __init__(self, *, active: int, capacity: int, worker_bits: int) -> None:
        self.active = active
        self.capacity = capacity
        super().__init__(
            f"All {capacity} worker slots are leased ({active} active, WORKER_BITS = "
            f"{worker_bits}). Stop idle processes, wait for expired leases, or raise "
            "WORKER_BITS (and lower another field) in a new layout."
        )


class WorkerLeaseLost(SnowflakeError):
    """Raised when this process no longer holds a worker lease and cannot claim a fresh one.

    ``reason`` says why, as one of the constants below; the attributes after each constant are
    the facts its reasons carry (``None`` when a reason has none), and ``pid`` is the process
    that raised it. No ID was issued.
    """

    #: One of :attr:`REASONS`.
    reason: str
    #: The process that raised the error.
    pid: int
    #: The worker slot concerned: the one forked, lost, taken over, held or released.
    worker_id: int | None = None

    #: A fork of the process given a fixed worker ID (the static allocator, or a generator
    #: built with ``worker_id``).
    FORKED = "forked"
    #: A fork made without Python's fork hooks (uWSGI's default) still holds its parent's slot.
    FORKED_WITHOUT_HOOKS = "forked_without_hooks"
    #: The process given ``worker_id``, of which ``pid`` is a fork.
    parent_pid: int | None = None

    #: The lease of ``worker_id`` was lost, and no other slot is free.
    NO_FREE_SLOT = "no_free_slot"
    #: Another process took over ``worker_id`` before ``clock_sequence`` was stored.
    TAKEN_OVER = "taken_over"
    #: Seconds since the database last granted or extended the lease (``None``: never).
    renewed_seconds_ago: float | None = None
    #: ``LEASE_SECONDS``: how long a lease lasts without renewal.
    lease_seconds: int | None = None

    #: The ``database`` failed with ``error`` while renewing or claiming a slot, or while
    #: storing ``clock_sequence``.
    DATABASE_ERROR = "database_error"
    #: A test runner refuses access to the ``database`` (``error`` is pytest-django's).
    DATABASE_BLOCKED = "database_blocked"
    #: Each of ``attempts`` claims in the ``database`` lost a race with another process.
    CLAIM_RACES_LOST = "claim_races_lost"
    #: The alias of the database in ``SNOWFLAKE["DATABASE"]``.
    database: str | None = None
    #: The error behind the reason, also the ``__cause__``: the database's, or the
    #: :class:`NoWorkerAvailable` of ``NO_FREE_SLOT``.
    error: BaseException | None = None
    #: How many claims were tried.
    attempts: int | None = None

    #: ``clock_sequence`` was to be stored, but this process holds no slot.
    NOT_HELD = "not_held"
    #: The clock-sequence value that could not be stored (no ID uses it).
    clock_sequence: int | None = None

    #: The ``database`` failed over or was restored: ``worker_id`` is held, but issues only
    #: from ``resume_at``, ``resume_in_seconds`` from now.
    FAILOVER = "failover"
    #: The database's incarnation since the failover.
    incarnation: str | None = None
    #: When IDs resume (the generator's clock).
    resume_at: datetime | None = None
    #: How many seconds from the error IDs resume.
    resume_in_seconds: float | None = None

    #: The generator was closed and ``worker_id`` released (:class:`GeneratorClosed`).
    CLOSED = "closed"

    #: Every reason, in the order above.
    REASONS = (
        FORKED,
        FORKED_WITHOUT_HOOKS,
        NO_FREE_SLOT,
        TAKEN_OVER,
        DATABASE_ERROR,
        DATABASE_BLOCKED,
        CLAIM_RACES_LOST,
        NOT_HELD,
        FAILOVER,
        CLOSED,
    )

    def __init__(self, reason: str, **facts: object) -> None:
        """``facts`` are the attributes above, by name; ``pid`` is this process's."""
        if reason not in self.REASONS:
            raise ValueError(f"Unknown reason {reason!r}; choose one of {self.REASONS}")
        unknown = facts.keys() - _LEASE_FACTS
        if unknown:
            raise TypeError(f"WorkerLeaseLost takes no fact {', '.join(sorted(unknown))}")
        self.reason = reason
        self.pid = os.getpid()
        self.__dict__.update(facts)
        super().__init__(self._message())

    def _message(self) -> str:
        reason, slot = self.reason, f"worker slot {self.worker_id}"
        if reason == self.CLOSED:
            released = "" if self.worker_id is None else f" (worker ID {self.worker_id})"
            return (
                f"This generator was closed and its worker slot released{released}: the "
                "runtime was reset, or settings.SNOWFLAKE changed. No ID was issued. Take the "
                "current generator from django_snowflake.get_generator() instead of keeping one."
            )
        if reason == self.FORKED:
            return (
                f"Worker ID {self.worker_id} was given to process {self.parent_pid}; process "
                f"{self.pid} is a fork of it and must not issue IDs with the same worker ID. "
                "Give each process its own worker ID (WORKER_ID, or a generator built in the "
                'child), or use a leasing allocator (WORKER_ALLOCATOR = "database").'
            )
        if reason == self.FORKED_WITHOUT_HOOKS:
            return (
                f"Process {self.pid} is a fork of process {self.parent_pid} made without "
                f"Python's fork hooks, so it still holds its parent's {slot} and must not "
                "issue IDs from it. Under uWSGI set py-call-uwsgi-fork-hooks = true (the hooks "
                "run) or lazy-apps = true (each worker loads the application); docs: "
                '"Worker IDs".'
            )
        if reason == self.NO_FREE_SLOT:
            return (
                f"This process lost its lease of {slot}{self._renewal()}, and no other slot "
                f"is free: {self.error} No ID was issued."
            )
        if reason == self.DATABASE_BLOCKED:
            return (
                f"No worker lease: claiming a slot needs the database {self.database!r} "
                f"({self.error}). In a test suite, use SNOWFLAKE = "
                '{"WORKER_ALLOCATOR": "static", "WORKER_ID": 0} (docs: "Testing").'
            )
        if reason == self.CLAIM_RACES_LOST:
            return (
                f"Could not claim a worker slot in the database {self.database!r} in "
                f"{self.attempts} attempts: every attempt lost a race with another process. "
                "No ID was issued. Retry; if it persists, fewer processes should start at the "
                "same moment."
            )
        if reason == self.FAILOVER:
            when = "?" if self.resume_at is None else self.resume_at.isoformat()
            return (
                f"The database {self.database!r} failed over or was restored (it is now "
                f"incarnation {self.incarnation!r}): a process whose lease writes it lost may "
                f"still issue IDs until {when}. This process holds {slot} and issues IDs from "
                f"then on, in {self.resume_in_seconds or 0:.1f} s; retry then. No ID was issued."
            )
        unstored = f"Clock sequence {self.clock_sequence} could not be stored"
        if reason == self.NOT_HELD:
            return (
                f"{unstored}: this process holds no worker slot, so no ID uses it; the next ID "
                "claims a fresh slot."
            )
        if reason == self.TAKEN_OVER:
            return (
                f"{unstored}: another process took over {slot}{self._renewal()}, so no ID "
                "uses it; the next ID claims a fresh slot."
            )
        if self.clock_sequence is not None:  # DATABASE_ERROR, storing a clock sequence
            return (
                f"{unstored} in the database {self.database!r} ({self.error}), so no ID uses "
                "it; the next ID claims a slot once it is back."
            )
        return (  # DATABASE_ERROR, renewing or claiming a slot
            f"No worker lease: renewing or claiming a slot in the database {self.database!r} "
            f"failed ({self.error}). No ID was issued. Retry once the database is back; if the "
            "table is missing, run `manage.py migrate`."
        )

    def _renewal(self) -> str:
        if self.renewed_seconds_ago is None:
            return ""
        return (
            f" (last renewed {self.renewed_seconds_ago:.1f} s ago; a lease lasts "
            f"{self.lease_seconds} s)"
        )


_LEASE_FACTS = frozenset(WorkerLeaseLost.__annotations__) - {"reason", "pid"}


class GeneratorClosed(WorkerLeaseLost):
    """Raised by a generator that was closed: the runtime replaced it (``reset()``, a change of
    ``settings.SNOWFLAKE``) and released its slot, so it may never claim or issue again."""

    def __init__(self, *, worker_id: int | None = None) -> None:
        super().__init__(WorkerLeaseLost.CLOSED, worker_id=worker_id)


class LayoutMismatch(SnowflakeError):
    """Raised when the worker table holds slots claimed under another bit layout."""

    def __init__(self, ours: str, theirs: str) -> None:
        self.ours = ours
        self.theirs = theirs
        super().__init__(
            f"This process uses the layout {ours}, but the worker table holds slots claimed "
            f"under {theirs}. Changing the epoch, time unit or bit split breaks the order and "
            "uniqueness of existing IDs; restore the old SNOWFLAKE settings."
        )


class InvalidSnowflake(SnowflakeError, ValueError):
    """Raised when a value is not a Snowflake ID of the layout."""


class BulkLoadError(SnowflakeError, ValueError):
    """Raised before any row is written when ``bulk_load`` cannot load a model or a row."""


class NotSupported(SnowflakeError):
    """Raised by a method of the per-database interface that a database does not implement."""

    def __init__(self, what: str, *, database: str, alias: str) -> None:
        self.what = what
        self.database = database
        self.alias = alias
        super().__init__(f"{what} is not supported on {database} (database {alias!r}).")
