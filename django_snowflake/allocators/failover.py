"""What a claim does after the database failed over or was restored (docs: "Worker IDs",
failover): the database's incarnation, when it was first seen, and the hold of a slot claimed
after it, which issues only above what any holder whose writes were lost could have used."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections
from django.db.models import F, Min
from django.db.models.functions import Greatest, Now

from .. import signals
from ..exceptions import WorkerLeaseLost
from ..generator import Lease
from ..layout import ms_to_datetime
from ..vendors import database

if TYPE_CHECKING:
    from ..generator import SnowflakeGenerator
    from ..layout import BitLayout
    from ..models import WorkerNode

logger = logging.getLogger("django_snowflake")

#: How far the database servers' clocks may disagree, and the app server's monotonic clock
#: drift during a skip, in milliseconds: a skipped holder's keys stay this much inside the
#: floor a later failover computes (_skip). Also the longest read of the database's time
#: that dates a skip: a slower one waits instead.
SKIP_TOLERANCE_MS = 250


def database_now(alias: str) -> datetime:
    """The database server's current time, as an aware datetime in UTC."""
    return database(connections[alias]).now()


def database_incarnation(alias: str) -> str:
    """The incarnation of the database ``alias``: which server and which history of its data.

    A failover to a standby or a point-in-time restore changes it, so a claim can tell that
    the ``WorkerNode`` rows it reads may have lost writes. PostgreSQL: the system identifier
    and the current timeline (``"7711368944615135348/2"``); MariaDB: the server ID, host name
    and port, or of a Galera cluster its state UUID (``"galera:<uuid>"``), the same on every
    node; MySQL: the server ID and ``server_uuid``; SQLite, or a server that does not
    say: ``""``.
    """
    return _incarnation(alias)[0]


def _incarnation(alias: str) -> tuple[str, bool]:
    """The incarnation, and whether the database was never a standby nor restored.

    ``True`` means a claim may trust an empty table: PostgreSQL on timeline 1 (a promotion or
    a point-in-time restore starts a new one), a MariaDB that never replicated from another
    server, a MySQL that holds no transaction of another server.
    """
    try:
        return database(connections[alias]).incarnation()
    except DatabaseError:
        # A managed service may hide these (Aurora has no WAL functions): no incarnation,
        # as on SQLite; the docs say what that leaves uncovered.
        logger.debug("The incarnation of database %r is unknown", alias, exc_info=True)
    return "", True


def asynchronous_standbys(alias: str) -> int | None:
    """How many standbys replicate the database ``alias`` asynchronously; ``None`` when it
    cannot tell (SQLite, no privilege to see them)."""
    try:
        return database(connections[alias]).asynchronous_standbys()
    except DatabaseError:
        return None


class FailoverHold:
    """The failover part of :class:`~.database.DatabaseAllocator`'s claim."""

    alias: str
    layout: BitLayout
    lease_seconds: int
    margin_ms: int
    #: "skip" or "wait": SNOWFLAKE["FAILOVER"].
    failover: str

    @property
    def skip_ms(self) -> int:
        """How far ahead of the database's time a skipped holder's keys may run."""
        return self.lease_seconds * 1000 + self.margin_ms - SKIP_TOLERANCE_MS

    #: The lease a claim took after a failover, and the unit it may not issue at or below
    #: before the lease of any holder whose writes the database lost has run out.
    _failover_hold: tuple[Lease, int, str] | None = None

    def _node(self) -> type[WorkerNode]:
        raise NotImplementedError

    _state: Any
    _pk: int | None
    _token: str | None
    _lease: Lease | None

    def _forget(self, lease: Lease) -> None:
        raise NotImplementedError

    def _incarnation_floor(self) -> tuple[str, Any, int]:
        """The database's incarnation, when it was first seen, and the time unit at or below
        which a claim may not issue because of a failover (-1: none).

        A failover or a restore may have lost the writes of a holder, so no row tells whether
        a slot is free, and an empty table may have lost every row. That holder stops by its
        own lease end, at most ``LEASE_SECONDS`` after its last renewal, which the old
        incarnation took before the new one was first seen. IDs carry absolute times, so a
        claim may issue above ``first seen + LEASE_SECONDS`` whatever the clocks; the holder's
        own limit is a margin earlier still (its clock is within the margin of the
        database's, see _measure_offset), and the margin is added again here for drift.
        "First seen" is the earliest among rows already carrying the incarnation, else now:
        two claims racing to be first both take their own time, which can only wait longer.
        """
        incarnation, original = _incarnation(self.alias)
        if not incarnation:
            return "", None, -1
        nodes = self._node().objects.using(self.alias)
        # Stored back as read (a round trip through Django keeps the value whatever the
        # zones), but measured by the database, which knows the zone it wrote it in.
        since: Any = nodes.filter(incarnation=incarnation).aggregate(
            first=Min("incarnation_since")
        )["first"]
        if since is None:
            since, seen_s = Now(), database_now(self.alias).timestamp()
        else:
            seen_s = self._first_seen(incarnation)
        # A database that was never a standby nor restored lost no write, unless its rows
        # came from another server (a dump restored into a new one).
        if original and not nodes.exclude(incarnation__in=(incarnation, "")).exists():
            return incarnation, since, -1
        ready_ms = seen_s * 1000 + self.lease_seconds * 1000 + self.margin_ms
        return incarnation, since, self.layout.to_units(math.ceil(ready_ms))

    def _first_seen(self, incarnation: str) -> float:
        """Seconds since 1970 at which the rows of ``incarnation`` first saw it."""
        connection = connections[self.alias]
        column = database(connection).epoch_sql("MIN(incarnation_since)")
        table = connection.ops.quote_name(self._node()._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {column} FROM {table} WHERE incarnation = %s", [incarnation])
            (seconds,) = cursor.fetchone()
        return float(seconds)

    def _hold_after_failover(
        self, generator: SnowflakeGenerator, lease: Lease, resume_floor: int
    ) -> Lease:
        """``lease``, skipped above what any holder whose writes were lost could have used
        (``FAILOVER = "skip"``), or held until then (``"wait"``: raise, keeping it)."""
        if resume_floor < 0:
            return lease
        incarnation = database_incarnation(self.alias)
        skipped = self._skip(generator, lease) if self.failover == "skip" else None
        resume_ms = self.layout.unit_start_ms((lease if skipped is None else skipped).floor + 1)
        signals.failover_seen.send(type(self), database=self.alias, incarnation=incarnation, worker_id=lease.worker_id, resume_at=ms_to_datetime(resume_ms), skipped=skipped is not None)  # fmt: skip
        if skipped is not None:
            logger.warning(
                "The database %r failed over or was restored (incarnation %s): worker slot %s "
                "issues at once, its keys up to %.1f s ahead of the clock until the clock "
                "reaches %s (FAILOVER = 'skip')",
                self.alias,
                incarnation,
                lease.worker_id,
                (resume_ms - generator.now()) / 1000,
                ms_to_datetime(resume_ms).isoformat(),
            )
            return skipped
        self._failover_hold = (lease, resume_floor, incarnation)
        self._wait_for_failover(generator)
        return lease

    def _skip(self, generator: SnowflakeGenerator, lease: Lease) -> Lease | None:
        """``lease``, allowed to issue above its floor at once, its keys never more than
        ``skip_ms`` ahead of the database's time when each is issued; ``None`` when its floor
        is further ahead than that (a slot another skip reserved: then it waits).

        Why a skip is safe after any number of failovers: a holder whose writes the new
        incarnation lost issued its last key before the promotion, so before the first
        sighting. A holder that waited issued below its lease's limit, at most ``LEASE_SECONDS``
        after its last renewal (three quarters by its own clock, within a quarter of the
        database's), and a holder that skipped below its issue time plus ``skip_ms``, which is
        shorter than ``LEASE_SECONDS`` plus the margin by the tolerance for the database
        servers' clocks: both lie below the first sighting plus ``LEASE_SECONDS`` plus the
        margin, the floor. The bound runs on the monotonic clock from the database time read
        here, so a step of the app server's clock cannot stretch it.
        """
        before = time.monotonic_ns()
        database_ms = database_now(self.alias).timestamp() * 1000
        since = time.monotonic_ns()
        if since - before > SKIP_TOLERANCE_MS * 1_000_000:
            return None  # the read took too long to date the bound well: wait instead
        bound = self.layout.to_units(math.floor(database_ms + self.skip_ms))
        # The claim that first sees the incarnation waits out the tolerance in its first ID
        # (the floor counts from its own sighting); a floor further ahead is a slot another
        # skip reserved, whose reservation this one would stretch: wait for the clock.
        if lease.floor + 1 - bound > 2 * SKIP_TOLERANCE_MS // self.layout.time_unit_ms:
            return None
        reserved = (self.lease_seconds * 1000 - self.margin_ms) // self.layout.time_unit_ms
        limit = max(lease.limit or 0, lease.floor + 1 + reserved)
        with self._state:
            pk, token = self._pk, self._token
        # The reservation is persisted before it is used, as every lease's.
        updated = pk is not None and (
            self._node()
            .objects.using(self.alias)
            .filter(pk=pk, token=token)
            .update(last_timestamp=Greatest(F("last_timestamp"), limit - 1))
        )
        if not updated:
            self._forget(lease)
            raise WorkerLeaseLost(WorkerLeaseLost.TAKEN_OVER, worker_id=lease.worker_id)
        skipped = dataclasses.replace(lease, limit=limit, ahead=(bound, since))
        with self._state:
            if self._lease is lease:
                self._lease = skipped
        return skipped

    def _wait_for_failover(self, generator: SnowflakeGenerator) -> None:
        """Raise ``WorkerLeaseLost`` while the slot claimed after a failover may not issue.

        A generator given a floor far ahead of its clock would raise ClockMovedBackwards or
        sleep for up to a whole lease inside ``generate()``; a clear error at once, saying
        when IDs resume, lets the caller decide (retry, fail the request, wait).
        """
        held = self._failover_hold
        if held is None:
            return
        lease, floor, incarnation = held
        now = generator.now()
        if self.layout.to_units(now) > floor:
            self._failover_hold = None
            return
        resume_ms = self.layout.unit_start_ms(floor + 1)
        raise WorkerLeaseLost(
            WorkerLeaseLost.FAILOVER,
            database=self.alias,
            incarnation=incarnation,
            worker_id=lease.worker_id,
            resume_at=ms_to_datetime(resume_ms),
            resume_in_seconds=(resume_ms - now) / 1000,
        )
