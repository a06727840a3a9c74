"""Signals for the events an operator wants to know about (docs: "Monitoring").

Each is sent off the ID path: from the allocator's own threads (claims, renewals, losses,
failovers, the database clocks) or, for what the generator sees while issuing (a clock that
stepped back, a wait), after it has released its lock. A signal nobody listens to costs a
check of an empty list. Receivers run on the thread that sends, so they should be quick and
must not ask the generator for an ID: a receiver of a claim runs while the claim's caller
waits.

Every signal is sent with ``sender`` the class of the object that saw the event and the
keyword arguments listed below; receivers take ``**kwargs`` as Django's do, so that arguments
added later do not break them.
"""

from __future__ import annotations

from django.dispatch import Signal

#: A worker slot was claimed. ``worker_id``, ``datacenter_id``; ``database``, the alias of
#: the coordination database (``None`` for an allocator without one); ``seconds``, how long
#: the claim took (the wait of the ID that asked for it, if one did).
lease_claimed = Signal()

#: A renewal extended the lease. ``worker_id``, ``database``; ``seconds_left``, how long the
#: process could still issue when the renewal landed; ``late``, whether it landed only after
#: failed attempts (``failures``, how many).
lease_renewed = Signal()

#: A renewal could not reach the database; the heartbeat tries again each second until the
#: lease's limit. ``worker_id``, ``database``, ``error`` (the exception); ``seconds_left``,
#: how long the process can still issue without a renewal.
lease_renewal_failed = Signal()

#: The slot was taken over or released while this process held it (its lease had lapsed):
#: no ID is issued under it any more, the next one claims a fresh slot. ``worker_id``,
#: ``database``.
lease_lost = Signal()

#: A claim found the coordination database on a new incarnation (a failover, a restore): its
#: IDs start above anything the old primary's holders may have issued. ``database``,
#: ``incarnation``, ``worker_id``; ``resume_at``, an aware datetime, the time of its first
#: ID; ``skipped``: True when it issues at once, its keys ahead of the clock until then
#: (``FAILOVER = "skip"``), False when its IDs wait until then (``"wait"``).
failover_seen = Signal()

#: The clock read a time before the last ID's. ``behind_ms``; ``policy``, the rollback
#: policy; ``action``, what it did: ``"waited"``, ``"borrowed"``, ``"clock_sequence"``,
#: ``"ring"`` or ``"raised"`` (:class:`~django_snowflake.exceptions.ClockMovedBackwards`).
#: Sent with ``generator``.
clock_moved_backwards = Signal()

#: The generator waited inside an ID. ``cause``: ``"sequence"`` (the time unit's sequence
#: was spent: it waited for the next unit), ``"clock"`` (the rollback policy waited for the
#: clock to catch up) or ``"lease"`` (the ID waited for a renewal or a claim); ``seconds``.
#: Sent with ``generator``.
generator_waited = Signal()

#: A process's heartbeat moved a database's key clock (MariaDB's column default).
#: ``database``; ``how``: ``"moved"`` (forward with the wall clock, each second) or
#: ``"skipped"`` (past what an old primary may have issued: a new incarnation).
database_clock_moved = Signal()

#: A database's function was found issuing keys more than a second behind the server's
#: clock (by the database health check, or a metrics scrape). ``database``, ``behind_ms``.
database_clock_behind = Signal()
