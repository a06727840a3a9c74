"""Every error this package raises, each carrying the numbers that explain it."""

from __future__ import annotations

from datetime import UTC, datetime


class SnowflakeError(Exception):
    """Base class for every error this package raises."""


class ClockMovedBackwards(SnowflakeError):
    """Raised when the clock went back further than the rollback policy tolerates."""

    def __init__(self, behind_ms: int, *, policy: str, max_rollback_ms: int) -> None:
        self.behind_ms = behind_ms
        self.policy = policy
        self.max_rollback_ms = max_rollback_ms
        tolerance = (
            "which the 'raise' rollback policy never tolerates"
            if policy == "raise"
            else f"more than the {policy!r} rollback policy tolerates "
            f"(MAX_ROLLBACK_MS = {max_rollback_ms})"
        )
        super().__init__(
            f"The clock moved backwards by {behind_ms} ms, {tolerance}. No ID was "
            "issued; retry once the clock has caught up, or fix the time source (NTP slewing, "
            "not stepping)."
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
                f"{reads}, outside the layout's lifespan ({epoch.isoformat()} to "
                f"{end.isoformat()}); no ID can be issued."
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
    """Raised when this process no longer holds a worker lease and cannot claim a fresh one."""


class GeneratorClosed(WorkerLeaseLost):
    """Raised by a generator that was closed: the runtime replaced it (``reset()``, a change of
    ``settings.SNOWFLAKE``) and released its slot, so it may never claim or issue again."""


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
