"""The ``database`` allocator: worker slots leased through the ``WorkerNode`` table.

The protocol (docs: "Worker IDs"):

* A **claim** takes a slot whose lease expired (by the database's clock) with a
  compare-and-set ``UPDATE ... WHERE pk = X AND token = T AND lease_expires_at < Now()``, or
  inserts the lowest unused worker ID, where the unique constraint settles races.
* Every claim and renewal writes a **reservation** into ``last_timestamp``: the highest time
  unit the holder may use until its next renewal. The generator never issues above it, and a
  new holder starts above it, so two holders of a slot can never issue the same time, whatever
  their clocks do. A renewal extends the generator only after the database confirmed it.
* A renewal that finds the row re-owned stops the generator at once; the next ID re-claims.
* All database work runs on the allocator's own threads, each with its own connection in
  autocommit: never inside the caller's transaction, and safe to start from async code.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import random
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.checks import CheckMessage, Error
from django.db import DatabaseError, IntegrityError, OperationalError, connections
from django.db.models import Case, F, When
from django.db.models.functions import Greatest, Now
from django.utils.translation import gettext_lazy as _

from .. import signals
from ..exceptions import (
    ClockOffsetTooLarge,
    LayoutMismatch,
    NoWorkerAvailable,
    SnowflakeError,
    WorkerLeaseLost,
)
from ..generator import Lease
from ..layout import ms_to_datetime
from ..vendors import database
from .base import THREAD_PREFIX, BaseAllocator, is_int, settings_message
from .failover import FailoverHold, database_incarnation, database_now
from .heartbeat import Heartbeat, blocked, with_connection
from .hosts import node_type

if TYPE_CHECKING:
    from ..generator import SnowflakeGenerator
    from ..layout import BitLayout
    from ..models import WorkerNode

logger = logging.getLogger("django_snowflake")

T = TypeVar("T")

# A lease reserves the time units up to three quarters of LEASE_SECONDS ahead of the clock
# (the last quarter is the margin_ms): milliseconds reserved per second of lease.
RESERVED_MS_PER_LEASE_SECOND = 750
# How many compare-and-set races a claim may lose before it gives up, and how long it may
# retry lock conflicts.
MAX_CLAIM_ATTEMPTS = 100
CLAIM_SECONDS = 10
#: How many times a renewal that meets a deadlock or a certification conflict runs again.
CONFLICT_ATTEMPTS = 3


class DatabaseAllocator(FailoverHold, Heartbeat, BaseAllocator):
    """Leases worker slots from the ``WorkerNode`` table of ``SNOWFLAKE["DATABASE"]``."""

    name = "database"

    @classmethod
    def check(
        cls, settings: Mapping[str, Any], layout: BitLayout | None, **kwargs: Any
    ) -> list[CheckMessage]:
        """E014, E023, besides the base checks: the reservation must leave room for a time
        unit and for what ``borrow`` takes ahead of the clock.

        A lease reserves time units up to three quarters of ``LEASE_SECONDS`` ahead of the
        clock, and the generator issues only below that limit: a unit longer than the
        reservation never gets below it (``generate()`` renews forever and never returns).
        """
        messages = super().check(settings, layout, **kwargs)
        lease = settings["LEASE_SECONDS"]
        if layout is None or not is_int(lease) or lease < 3:
            return messages  # E035 (checks.settings) reports the lease
        reserved_ms = lease * RESERVED_MS_PER_LEASE_SECOND
        unit = layout.time_unit_ms
        bound = settings["MAX_ROLLBACK_MS"]
        borrows = settings["CLOCK_ROLLBACK"] == "borrow" and is_int(bound)
        # (ID, whether it applies, message, hint, the placeholder and value of what needs
        # more than the reservation): both name the reservation and the lease that fits.
        spans = (
            (
                "E014",
                unit > reserved_ms,
                _(
                    "TIME_UNIT_MS %(unit)s is longer than the %(reserved)s ms a lease of "
                    "LEASE_SECONDS %(lease)s reserves ahead (three quarters of it): the "
                    "database allocator could never issue an ID."
                ),
                _(
                    "Raise LEASE_SECONDS to %(lease_needed)s or more, or lower TIME_UNIT_MS to "
                    "%(reserved)s or less."
                ),
                "unit",
                unit,
            ),
            (
                "E023",
                borrows and bound > reserved_ms,
                _(
                    "MAX_ROLLBACK_MS %(bound)s lets the 'borrow' policy run further ahead of "
                    "the clock than the %(reserved)s ms a lease of LEASE_SECONDS %(lease)s "
                    "reserves (three quarters of it): IDs would stall at the reservation's end "
                    "instead of being borrowed."
                ),
                _(
                    "Lower MAX_ROLLBACK_MS to %(reserved)s or less, or raise LEASE_SECONDS to "
                    "%(lease_needed)s or more."
                ),
                "bound",
                bound,
            ),
        )
        for check_id, applies, msg, hint, name, needed_ms in spans:
            if applies:
                messages.append(
                    settings_message(
                        Error,
                        check_id,
                        msg,
                        hint,
                        reserved=reserved_ms,
                        lease=lease,
                        lease_needed=-(-needed_ms // RESERVED_MS_PER_LEASE_SECOND),
                        **{name: needed_ms},
                    )
                )
        return messages

    def __init__(self, layout: BitLayout, settings: Mapping[str, Any]) -> None:
        super().__init__(layout, settings)
        self.alias: str = settings["DATABASE"]
        self.lease_seconds: int = settings["LEASE_SECONDS"]
        self.label: str = settings["PROCESS_LABEL"]
        self.datacenter_id: int = settings["DATACENTER_ID"]
        self.failover: str = settings["FAILOVER"]
        # The holder stops issuing this long before the database lets anyone else take the
        # slot, so a late heartbeat or a slow clock never lets two holders overlap in time.
        self.margin_ms = self.lease_seconds * (1000 - RESERVED_MS_PER_LEASE_SECOND)
        self._reset_process_state()

    def _reset_process_state(self) -> None:
        self._state = threading.Lock()
        self._pk: int | None = None
        self._token: str | None = None
        self._lease: Lease | None = None
        #: The slot of the last lease this process lost, until it holds another.
        self._lost_worker_id: int | None = None
        self._unsignalled_loss: int | None = None  # lease_lost to send (_signal_loss)
        #: When (time.monotonic()) the database last granted or extended a lease to us.
        self._renewed_at: float | None = None
        self._generator: weakref.ref[SnowflakeGenerator] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()
        #: Seconds the last claim took, and the clock offset (app minus database) it measured.
        self.claim_seconds: float | None = None
        self.clock_offset_ms: float | None = None

    # Running database work on our own thread.

    def _run(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the allocator's thread, with that thread's own connection."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"{THREAD_PREFIX}claim"
            )
        return self._executor.submit(with_connection, self.alias, function).result()

    def _node(self) -> type[WorkerNode]:
        from ..models import WorkerNode

        return WorkerNode

    # The allocator interface.

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        self._generator = weakref.ref(generator)
        started, token = time.perf_counter(), self._token
        try:
            lease = self._run(lambda: self._renewed_lease(generator) or self._claim(generator))
        except NoWorkerAvailable as exc:
            if self._lost_worker_id is None:
                raise
            raise WorkerLeaseLost(
                WorkerLeaseLost.NO_FREE_SLOT,
                worker_id=self._lost_worker_id,
                error=exc,
                **self._renewal_facts(),
            ) from exc
        except SnowflakeError:
            raise
        except DatabaseError as exc:
            raise WorkerLeaseLost(
                WorkerLeaseLost.DATABASE_ERROR, database=self.alias, error=exc
            ) from exc
        except RuntimeError as exc:
            if not blocked(exc):
                raise
            raise WorkerLeaseLost(
                WorkerLeaseLost.DATABASE_BLOCKED, database=self.alias, error=exc
            ) from exc
        finally:
            self._signal_loss()
        self.claim_seconds = time.perf_counter() - started
        if self._token != token:  # a slot claimed, not the lease held renewed
            signals.lease_claimed.send(type(self), worker_id=lease.worker_id, datacenter_id=lease.datacenter_id, database=self.alias, seconds=self.claim_seconds)  # fmt: skip
        self._start_heartbeat()
        return lease

    def persist_clock_sequence(self, value: int) -> None:
        pk, token, lease = self._pk, self._token, self._lease
        if pk is None:
            raise WorkerLeaseLost(WorkerLeaseLost.NOT_HELD, clock_sequence=value)
        try:
            updated = self._run(
                lambda: (
                    self._node()
                    .objects.using(self.alias)
                    .filter(pk=pk, token=token)
                    .update(clock_sequence=value)
                )
            )
        except DatabaseError as exc:
            raise WorkerLeaseLost(
                WorkerLeaseLost.DATABASE_ERROR,
                database=self.alias,
                error=exc,
                clock_sequence=value,
            ) from exc
        if not updated:
            raise WorkerLeaseLost(
                WorkerLeaseLost.TAKEN_OVER,
                worker_id=None if lease is None else lease.worker_id,
                clock_sequence=value,
                **self._renewal_facts(),
            )

    def close(self) -> None:
        self._stop.set()
        generator = self._generator() if self._generator is not None else None
        if generator is not None:
            # Closed first, under the generator's lock: a thread inside generate() finishes
            # its ID, and none can renew or claim after the release below.
            lease, high = generator.relinquish(final=True)
            if lease is not None and self._token is not None:
                try:
                    try:
                        self._run(lambda: self._release(high))
                    except RuntimeError:  # at interpreter exit no new thread may start
                        with_connection(self.alias, lambda: self._release(high))
                except Exception as exc:  # a release is a courtesy; the lease expires anyway
                    # One line: at interpreter exit the table may be gone (a test database).
                    logger.warning("Could not release worker slot %s: %s", lease.worker_id, exc)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def after_fork_in_child(self) -> None:
        # The parent keeps its slot, token, threads and connections; the child starts clean.
        self._reset_process_state()

    def describe(self) -> dict[str, Any]:
        facts = super().describe()
        facts.update(database=self.alias, lease_seconds=self.lease_seconds)
        pk = self._pk
        if pk is not None:
            node = self._run(lambda: self._node().objects.using(self.alias).get(pk=pk))
            facts.update(
                lease_expires_at=node.lease_expires_at.isoformat(),
                heartbeat_at=node.heartbeat_at.isoformat(),
                reserved_until=ms_to_datetime(
                    self.layout.unit_start_ms(node.last_timestamp + 1)
                ).isoformat(),
                claim_ms=None
                if self.claim_seconds is None
                else round(self.claim_seconds * 1000, 2),
                clock_offset_ms=self.clock_offset_ms,
                incarnation=node.incarnation,
                incarnation_since=None
                if node.incarnation_since is None
                else node.incarnation_since.isoformat(),
            )
        return facts

    # Database work, on the allocator's thread.

    def _reservation(
        self, generator: SnowflakeGenerator, lease: Lease | None = None
    ) -> tuple[int, int]:
        """The limit (exclusive) and high-water mark of a lease taken or renewed now: three
        quarters of a lease ahead of the clock, or of the last unit used while a skipped
        ``lease`` runs ahead of the clock."""
        reserved_ms = self.lease_seconds * 1000 - self.margin_ms
        limit = self.layout.to_units(generator.now() + reserved_ms)
        if lease is not None and lease.ahead is not None:
            limit = max(
                limit, generator.last_timestamp + 1 + reserved_ms // self.layout.time_unit_ms
            )
        return limit, limit - 1

    def _lease_expiry(self) -> Any:
        return Now() + timedelta(seconds=self.lease_seconds)

    def _renewed_lease(self, generator: SnowflakeGenerator) -> Lease | None:
        """The lease held, extended, for the generator to install; ``None`` if it is lost."""
        with self._state:
            lease = self._lease
        limit = None if lease is None else self._renew(generator, lease)
        if lease is None or limit is None:
            return None
        renewed = Lease(
            lease.worker_id,
            datacenter_id=lease.datacenter_id,
            floor=lease.floor,
            limit=limit,
            clock_sequence=generator.clock_sequence,
            ahead=lease.ahead,
        )
        with self._state:
            self._lease = renewed
        held = self._failover_hold
        if held is not None and held[0] is lease:
            # Claimed after a failover: the slot stays ours, the IDs wait for the floor.
            self._failover_hold = (renewed, held[1], held[2])
            self._wait_for_failover(generator)
        return renewed

    def _renew(self, generator: SnowflakeGenerator, lease: Lease) -> int | None:
        """Extend ``lease`` in the database; return its new limit, or ``None`` if it is lost."""
        with self._state:
            pk, token = self._pk, self._token
        if pk is None:
            return None
        limit, high_water = self._reservation(generator, lease)
        # After a failover our row may be older than our last renewal, but if it still
        # carries our token nobody else has claimed the slot since: we keep it, and record
        # when we first saw the new incarnation.
        incarnation = database_incarnation(self.alias)
        update = (
            self._node()
            .objects.using(self.alias)
            .filter(pk=pk, token=token, released_at__isnull=True)
            .update
        )
        renewal = functools.partial(
            update,
            # Before `incarnation`: MySQL and MariaDB assign left to right, each column
            # seeing those already assigned, so afterwards the row would always match
            # and keep the old incarnation's time, and the next claim would not wait.
            incarnation_since=Case(
                When(
                    incarnation=incarnation,
                    incarnation_since__isnull=False,
                    then=F("incarnation_since"),
                ),
                default=Now(),
            ),
            incarnation=incarnation,
            heartbeat_at=Now(),
            lease_expires_at=self._lease_expiry(),
            last_timestamp=Greatest(F("last_timestamp"), high_water),
        )
        updated = self._retry_conflicts(renewal, lease.worker_id, incarnation)
        if not updated:
            self._forget(lease)
            return None
        with self._state:
            if self._lease is lease:
                self._renewed_at = time.monotonic()
        return limit

    def _retry_conflicts(self, write: Callable[[], int], worker_id: int, incarnation: str) -> int:
        """The rows ``write`` (a compare-and-set on our token) updated, retried when it met a
        concurrent write to the row; 0 when such writes keep coming.

        Error 1213 is a deadlock in InnoDB, or in a Galera cluster a certification conflict:
        another node committed a write to our row first (a takeover of a lease it saw
        expired), and this node had not applied it yet when we read the row. Our write was
        rolled back whole, so running it again is safe: it matches our token or nothing. In
        Galera the retry first waits until this node has applied every write the cluster
        committed before it (``wsrep_sync_wait``), so it sees the other write.
        """
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                return write()
            except OperationalError as exc:
                keys = database(connections[self.alias])
                if not keys.is_conflict(exc):
                    raise
                logger.warning(
                    "Worker lease renewal of slot %s met a concurrent write to its row "
                    "(certification conflict or deadlock, attempt %s): %s",
                    worker_id,
                    attempt + 1,
                    exc,
                )
                keys.after_conflict()
        return 0

    def _other_layout(self) -> str | None:
        """The fingerprint of a slot claimed under another layout, if the table holds one."""
        return (
            self._node()
            .objects.using(self.alias)
            .exclude(layout=self.layout.fingerprint)
            .values_list("layout", flat=True)
            .first()
        )

    def _claim(self, generator: SnowflakeGenerator) -> Lease:
        other = self._other_layout()
        if other is not None:
            raise LayoutMismatch(self.layout.fingerprint, other)
        self._measure_offset(generator)
        hostname = socket.gethostname()
        deadline = time.monotonic() + CLAIM_SECONDS
        for attempt in range(MAX_CLAIM_ATTEMPTS):
            try:
                lease = self._claim_once(generator, hostname, attempt)
            except IntegrityError:
                pass  # another process inserted this worker ID first
            except OperationalError as exc:
                # The database broke a lock cycle between two claims (SQLite's "database is
                # locked", InnoDB's deadlock): retry. An outage, or a lock that a transaction
                # keeps, fails until the deadline.
                if time.monotonic() > deadline:
                    raise OperationalError(f"{exc}{self._lock_hint(exc)}") from exc
            else:
                if lease is not None:
                    return lease
            time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
        raise WorkerLeaseLost(
            WorkerLeaseLost.CLAIM_RACES_LOST, database=self.alias, attempts=MAX_CLAIM_ATTEMPTS
        )

    def _claim_once(
        self, generator: SnowflakeGenerator, hostname: str, attempt: int
    ) -> Lease | None:
        """One compare-and-set attempt; ``None`` when another process won the candidate."""
        nodes = self._node().objects.using(self.alias)
        token = uuid.uuid4().hex
        limit, high_water = self._reservation(generator)
        holder = {
            "host_name": hostname[:255],
            "process_id": os.getpid(),
            "label": self.label,
            "node_type": node_type(),
            "heartbeat_at": Now(),
            "lease_expires_at": self._lease_expiry(),
            "token": token,
        }
        incarnation, since, resume_floor = self._incarnation_floor()
        holder.update(incarnation=incarnation, incarnation_since=since)
        expired = nodes.filter(
            datacenter_id=self.datacenter_id, lease_expires_at__lt=Now()
        ).order_by("worker_id")
        # A slot whose high-water mark is ahead of our clock (its last holder's clock ran
        # fast) would make us wait or raise: take one only when no other slot is left.
        tolerance = (
            0
            if generator.rollback == "raise"
            else generator.max_rollback_ms // self.layout.time_unit_ms
        )
        usable = expired.filter(
            last_timestamp__lte=self.layout.to_units(generator.now()) + tolerance
        )
        # Like free IDs, after lost races one of the lowest few, so that the processes of a
        # restarted host do not all race for the same released slot.
        spread = min(2**attempt, 64)
        candidates = list(usable.filter(host_name=hostname)[:spread]) or list(usable[:spread])
        candidate = random.choice(candidates) if candidates else None
        if candidate is None:
            worker_id = self._free_worker_id(attempt)
            if worker_id is not None:
                row = nodes.create(
                    **holder,
                    worker_id=worker_id,
                    datacenter_id=self.datacenter_id,
                    launched_at=Now(),
                    last_timestamp=high_water,
                    layout=self.layout.fingerprint,
                )
                return self._take(
                    generator, row, token, limit, resume_floor, resume_floor, inserted=True
                )
            candidate = expired.first()
            if candidate is None:
                raise self._no_worker_available()
        # Equal high-water mark and clock sequence: the floor and the clock sequence we read
        # are still the slot's, even if its old holder renewed, issued and released since.
        won = nodes.filter(
            pk=candidate.pk,
            token=candidate.token,
            lease_expires_at__lt=Now(),
            last_timestamp=candidate.last_timestamp,
            clock_sequence=candidate.clock_sequence,
        ).update(
            **holder,
            launched_at=Now(),
            released_at=None,
            last_timestamp=Greatest(F("last_timestamp"), high_water),
        )
        if not won:
            return None
        floor = max(candidate.last_timestamp, resume_floor)
        return self._take(generator, candidate, token, limit, floor, resume_floor)

    def _take(
        self,
        generator: SnowflakeGenerator,
        row: WorkerNode,
        token: str,
        limit: int,
        floor: int,
        resume_floor: int,
        *,
        inserted: bool = False,
    ) -> Lease:
        """The lease of the slot just claimed, once its layout is the only one in the table
        and any failover wait is over (else raise, having given it back or keeping it)."""
        self._verify_layout(row, token, inserted)
        lease = self._hold(row, token, limit, floor=floor)
        return self._hold_after_failover(generator, lease, resume_floor)

    def _verify_layout(self, row: WorkerNode, token: str, inserted: bool) -> None:
        """Give the slot just claimed back if a slot of another layout exists now.

        The check before the claim cannot see a claim of another layout racing ours (an
        empty table at a first deploy, a rolling deploy that changes bits). Checked after
        both rows are written, at least the later of two racing claims sees the other's row,
        so at most one layout ever issues; when both see each other, both give up.
        """
        other = self._other_layout()
        if other is None:
            return
        nodes = self._node().objects.using(self.alias).filter(pk=row.pk, token=token)
        if inserted:
            nodes.delete()  # the row this claim inserted: the table is as it was before
        else:
            nodes.update(released_at=Now(), lease_expires_at=Now())
        raise LayoutMismatch(self.layout.fingerprint, other)

    def _lock_hint(self, error: OperationalError) -> str:
        return database(connections[self.alias]).lock_hint(error)

    def _free_worker_id(self, attempt: int) -> int | None:
        """The lowest unused worker ID; after lost races, one of the lowest few, at random.

        ``None`` when every worker ID has a row.
        """
        used = set(
            self._node()
            .objects.using(self.alias)
            .filter(datacenter_id=self.datacenter_id)
            .values_list("worker_id", flat=True)
        )
        spread = min(2**attempt, 64)
        free: list[int] = []
        for worker_id in range(self.layout.max_worker_id + 1):
            if worker_id not in used:
                free.append(worker_id)
                if len(free) >= spread:
                    break
        return random.choice(free) if free else None

    def _no_worker_available(self) -> NoWorkerAvailable:
        active = (
            self._node()
            .objects.using(self.alias)
            .filter(datacenter_id=self.datacenter_id, lease_expires_at__gte=Now())
            .count()
        )
        return NoWorkerAvailable(
            active=active,
            capacity=self.layout.max_worker_id + 1,
            worker_bits=self.layout.worker_bits,
        )

    def _measure_offset(self, generator: SnowflakeGenerator) -> None:
        before = generator.now()
        db_ms = database_now(self.alias).timestamp() * 1000
        after = generator.now()
        offset = (before + after) / 2 - db_ms
        self.clock_offset_ms = offset
        if abs(offset) - (after - before) / 2 > self.margin_ms:
            raise ClockOffsetTooLarge(
                offset, lease_seconds=self.lease_seconds, margin_ms=self.margin_ms
            )

    def _hold(self, row: WorkerNode, token: str, limit: int, *, floor: int) -> Lease:
        lease = Lease(
            row.worker_id,
            datacenter_id=row.datacenter_id,
            floor=floor,
            limit=limit,
            clock_sequence=row.clock_sequence,
        )
        with self._state:
            self._pk, self._token, self._lease = row.pk, token, lease
            self._lost_worker_id = None
            self._renewed_at = time.monotonic()
        return lease

    def _renewal_facts(self) -> dict[str, Any]:
        """For a ``WorkerLeaseLost``: how long ago the lease was last granted or extended."""
        renewed_at = self._renewed_at
        return {
            "renewed_seconds_ago": None if renewed_at is None else time.monotonic() - renewed_at,
            "lease_seconds": self.lease_seconds,
        }

    def _forget(self, lease: Lease) -> None:
        with self._state:
            if self._lease is lease:
                self._pk = self._token = self._lease = None
                self._lost_worker_id = self._unsignalled_loss = lease.worker_id

    def _signal_loss(self) -> None:
        """``lease_lost``, once the generator issues no more IDs under the lost lease: the
        heartbeat sends it after revoking the lease, a claim after it ends (the generator
        issues nothing while it waits for one)."""
        with self._state:
            worker_id, self._unsignalled_loss = self._unsignalled_loss, None
        if worker_id is not None:
            signals.lease_lost.send(type(self), worker_id=worker_id, database=self.alias)

    def _release(self, high: int) -> None:
        pk = self._pk
        if pk is None:
            return
        self._node().objects.using(self.alias).filter(pk=pk, token=self._token).update(
            released_at=Now(), lease_expires_at=Now(), last_timestamp=high
        )
        with self._state:
            self._pk = self._token = self._lease = None
