"""Readiness and database health, as plain Django views (docs: "Monitoring").

:func:`readiness` answers "can this process issue an ID now, without waiting?" from what the
process already knows: its generator's lease, the time left under it, a failover wait. It
never claims a slot, never takes the generator's lock and never queries, so a probe that
comes every second costs the ID path nothing, and a probe that comes while the database is
away answers at once. :func:`database_health` asks each database whether its key function is
installed and how far its clock is behind the server's: that one queries, so it belongs to a
slower health endpoint, not to a readiness probe.

django-health-check's checks over the same functions are in
:mod:`django_snowflake.healthchecks`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache

from . import signals
from .layout import ms_to_datetime

#: Not ready once the lease has less than this share of ``LEASE_SECONDS`` left. A healthy
#: heartbeat renews every third of the lease, to three quarters of it ahead, so a lease never
#: falls below ``3/4 - 1/3`` (about 0.42) of it while renewals land; a quarter leaves time for
#: a slow renewal, and takes the process out of a load balancer a quarter of the lease before
#: its IDs stop.
READY_SHARE = 0.25

#: A database function whose clock (the time of its last key) is further behind the server's
#: than this, where the heartbeats move it, is unhealthy.
BEHIND_LIMIT_MS = 1000


@dataclasses.dataclass(frozen=True)
class Readiness:
    """The verdict of :func:`readiness`: ``ready``, ``reason`` (in words, empty when ready),
    the ``worker_id`` held and the ``seconds_left`` under its lease (``None``: none held, or
    a lease without end)."""

    ready: bool
    reason: str = ""
    worker_id: int | None = None
    seconds_left: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def readiness() -> Readiness:
    """Whether this process can issue an ID now without waiting (never claims, blocks or
    queries): a lease held, not in a failover wait, with more than :data:`READY_SHARE` of
    ``LEASE_SECONDS`` left, and a clock not behind its last ID by more than the rollback
    policy tolerates."""
    from . import runtime

    try:
        generator = runtime.get_generator()  # built without a query; claims nothing
    except ImproperlyConfigured:
        return Readiness(False, gettext("SNOWFLAKE settings are invalid: run manage.py check."))
    if generator.closed:
        return Readiness(False, gettext("The generator is closed (the process is exiting)."))
    layout = generator.layout
    now = generator.now()
    allocator = generator.lease_source
    # (lease, floor, incarnation) while a slot claimed after a failover may not issue yet.
    hold = getattr(allocator, "_failover_hold", None)
    if hold is not None and layout.to_units(now) <= hold[1]:
        resume = ms_to_datetime(layout.unit_start_ms(hold[1] + 1))
        return Readiness(
            False,
            gettext("Waiting after a failover of the database until %(resume)s.")
            % {"resume": resume.isoformat()},
            worker_id=hold[0].worker_id,
        )
    lease = generator.lease
    if lease is None:
        return Readiness(
            False,
            gettext(
                "No worker slot is held yet: the first ID will claim one (CLAIM_ON_READY "
                "claims it at the first request)."
            ),
        )
    limit_ms = generator.lease_limit_ms
    seconds_left: float | None = None
    if limit_ms is not None:
        seconds_left = (limit_ms - now) / 1000
        lease_seconds = getattr(allocator, "lease_seconds", None)
        needed = 0.0 if lease_seconds is None else lease_seconds * READY_SHARE
        if seconds_left <= needed:
            return Readiness(
                False,
                gettext(
                    "The worker lease has %(left).1f s left and is not being renewed (the "
                    "database is away?): IDs stop when it ends."
                )
                % {"left": max(seconds_left, 0.0)},
                worker_id=lease.worker_id,
                seconds_left=seconds_left,
            )
    ahead_ms = layout.unit_start_ms(generator.last_timestamp) - now
    if ahead_ms > generator.max_rollback_ms:
        return Readiness(
            False,
            gettext("The clock is %(ms)d ms behind the last ID: IDs wait for it.")
            % {"ms": ahead_ms},
            worker_id=lease.worker_id,
            seconds_left=seconds_left,
        )
    return Readiness(True, worker_id=lease.worker_id, seconds_left=seconds_left)


@dataclasses.dataclass(frozen=True)
class DatabaseHealth:
    """The verdict of :func:`database_health` for one database: ``healthy``, its
    ``database`` alias, the function's ``report`` (:func:`~django_snowflake.database_keys.function_report`)
    and ``problem`` in words (empty when healthy)."""

    database: str
    healthy: bool
    report: dict[str, Any]
    problem: str = ""


def database_health(aliases: Iterable[str] | None = None) -> list[DatabaseHealth]:
    """For each database (``aliases``; default: every one configured) that has a key function
    of its own (SQLite's is the process's generator: none is listed), whether the function is
    installed, issues under a slot, and, where the heartbeats move its clock, is at most
    :data:`BEHIND_LIMIT_MS` behind the server's clock. Queries each database; a database found
    behind sends :data:`~django_snowflake.signals.database_clock_behind`."""
    from .database_keys import function_report
    from .slots import function_in_words

    results = []
    for alias in connections if aliases is None else aliases:
        report = function_report(alias)
        if report is None:
            continue
        problem = ""
        behind = report.get("behind_ms")
        broken = "error" in report or not report["installed"] or report["slot"] is None
        if broken or (behind is not None and clock_behind(alias, behind)):
            problem = function_in_words(report)
        results.append(DatabaseHealth(alias, not problem, report, problem))
    return results


def clock_behind(alias: str, behind_ms: int) -> bool:
    """Whether database ``alias``'s key clock, ``behind_ms`` behind the server's, is late:
    more than :data:`BEHIND_LIMIT_MS`, where the heartbeats move it (MariaDB's column
    default). A function that catches up as it draws (PostgreSQL's) is as old as the database
    is idle, which is no fault. A late clock sends
    :data:`~django_snowflake.signals.database_clock_behind`."""
    from .vendors import database_class

    kind = database_class(connections[alias])
    if not kind.moves_clock or behind_ms <= BEHIND_LIMIT_MS:
        return False
    signals.database_clock_behind.send(kind, database=alias, behind_ms=behind_ms)
    return True


@never_cache
def readiness_view(request: HttpRequest) -> JsonResponse:
    """:func:`readiness` as JSON: status 200 when ready, 503 when not (a Kubernetes
    readiness probe's ``httpGet``)."""
    verdict = readiness()
    return JsonResponse(verdict.as_dict(), status=200 if verdict.ready else 503)


@never_cache
def health_view(request: HttpRequest) -> JsonResponse:
    """:func:`readiness` and :func:`database_health` as JSON: status 200 when both are well,
    503 otherwise."""
    verdict = readiness()
    databases = database_health()
    healthy = verdict.ready and all(entry.healthy for entry in databases)
    body = {
        "healthy": healthy,
        "readiness": verdict.as_dict(),
        "databases": [dataclasses.asdict(entry) for entry in databases],
    }
    return JsonResponse(body, status=200 if healthy else 503)
