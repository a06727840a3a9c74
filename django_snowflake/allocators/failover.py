"""What a claim does after the database failed over or was restored (docs: "Worker IDs",
failover): the database's incarnation, when it was first seen, and the hold of a slot claimed
after it, which issues only above what any holder whose writes were lost could have used."""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections
from django.db.models import Min
from django.db.models.functions import Now

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

    #: The lease a claim took after a failover, and the unit it may not issue at or below
    #: before the lease of any holder whose writes the database lost has run out.
    _failover_hold: tuple[Lease, int, str] | None = None

    def _node(self) -> type[WorkerNode]:
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
        """``lease``, unless a failover keeps it from issuing yet (then raise, keeping it)."""
        if resume_floor < 0:
            return lease
        self._failover_hold = (lease, resume_floor, database_incarnation(self.alias))
        signals.failover_seen.send(type(self), database=self.alias, incarnation=self._failover_hold[2], worker_id=lease.worker_id, resume_at=ms_to_datetime(self.layout.unit_start_ms(resume_floor + 1)))  # fmt: skip
        self._wait_for_failover(generator)
        return lease

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
