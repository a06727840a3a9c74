"""Prometheus metrics over ``prometheus_client`` (the ``prometheus`` extra; docs: "Monitoring").

Add ``"django_snowflake.metrics.MetricsConfig"`` to ``INSTALLED_APPS`` (its ``ready()``
connects the receivers below to :mod:`django_snowflake.signals`) and serve :func:`metrics_view`
(or your own exporter of the default registry). Under gunicorn with several workers set
``PROMETHEUS_MULTIPROC_DIR`` before the workers start, as ``prometheus_client``'s
multiprocess mode asks: each worker writes its values to files there, and the view sums the
counters of every worker and lists each live worker's gauges with a ``pid`` label
(``child_exit`` must call ``prometheus_client.multiprocess.mark_process_dead``).

Nothing here runs per ID, nor per wait. The IDs issued and the waits are read from the
generator's own counts (:attr:`~django_snowflake.generator.SnowflakeGenerator.issued` and
``waits``) at every claim, renewal and failed renewal and at a scrape; clock steps come from
the generator's signal, which it sends after releasing its lock; the lease's limit from the
allocator's signals, on its heartbeat thread; the database clocks are read at a scrape.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

from django.apps import AppConfig
from django.db import DatabaseError, connections
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import signals
from .health import clock_behind

IDS_ISSUED = Counter("snowflake_ids_issued", "IDs issued by this process's generator.")
WAITS = Counter(
    "snowflake_generator_waits",
    "Waits of the generator inside an ID, by cause: sequence (the time unit was spent), "
    "clock (the rollback policy waited for the clock), lease (a renewal or a claim).",
    ["cause"],
)
WAIT_SECONDS = Counter(
    "snowflake_generator_wait_seconds", "Seconds the generator waited, by cause.", ["cause"]
)
CLOCK_STEPS_BACK = Counter(
    "snowflake_clock_steps_back",
    "Times the clock read a time before the last ID's, by what the rollback policy did.",
    ["action"],
)
LEASE_LIMIT = Gauge(
    "snowflake_lease_limit_timestamp_seconds",
    "When (Unix time) this process stops issuing IDs unless its lease is renewed.",
    multiprocess_mode="liveall",
)
LEASE_LEFT = Gauge(
    "snowflake_lease_seconds_left",
    "Seconds this process could still issue IDs without a renewal, as of its last claim, "
    "renewal (or failed attempt) or scrape.",
    multiprocess_mode="liveall",
)
RENEWALS = Counter(
    "snowflake_lease_renewals",
    "Lease renewals by outcome: ok, late (after failed attempts), failed, lost.",
    ["outcome"],
)
FAILOVERS = Counter(
    "snowflake_failovers_seen",
    "Claims that found the coordination database on a new incarnation (a failover).",
)
CLAIM_SECONDS = Histogram(
    "snowflake_lease_claim_seconds",
    "Worker slot claims and how long each took.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
DATABASE_CLOCK_MOVES = Counter(
    "snowflake_database_clock_moves",
    "Moves of a database's key clock by this process's heartbeat, by how: moved, skipped.",
    ["database", "how"],
)

#: Per process: the generator last read and how many of its IDs were counted already.
_state_lock = threading.Lock()
_counted: dict[str, Any] = {"generator": None, "issued": 0, "waits": {}}


def record_generator() -> None:
    """Count the IDs issued since the last call and set the lease gauges, from the current
    generator's state (no lock of the generator, no query)."""
    from . import runtime

    generator = runtime._generator
    if generator is None:
        return
    with _state_lock:
        if _counted["generator"] is not generator:
            _counted.update(generator=generator, issued=0, waits={})
        issued = generator.issued
        if issued > _counted["issued"]:
            IDS_ISSUED.inc(issued - _counted["issued"])
            _counted["issued"] = issued
        for cause, (count, seconds) in generator.waits.items():
            before = _counted["waits"].get(cause, (0, 0.0))
            if count > before[0]:
                WAITS.labels(cause).inc(count - before[0])
                WAIT_SECONDS.labels(cause).inc(seconds - before[1])
                _counted["waits"][cause] = (count, seconds)
    limit_ms = generator.lease_limit_ms
    if limit_ms is None:
        LEASE_LIMIT.set(0)
        LEASE_LEFT.set(0)
    else:
        LEASE_LIMIT.set(limit_ms / 1000)
        LEASE_LEFT.set(max(0.0, (limit_ms - generator.now()) / 1000))


# Receivers: each runs on the thread that sent the signal (the allocator's, for leases).


def _claimed(*, seconds: float, **kwargs: Any) -> None:
    CLAIM_SECONDS.observe(seconds)
    record_generator()


def _renewed(*, late: bool, **kwargs: Any) -> None:
    RENEWALS.labels("late" if late else "ok").inc()
    record_generator()


def _renewal_failed(**kwargs: Any) -> None:
    RENEWALS.labels("failed").inc()
    record_generator()


def _lost(**kwargs: Any) -> None:
    RENEWALS.labels("lost").inc()
    record_generator()


def _failover(**kwargs: Any) -> None:
    FAILOVERS.inc()


def _stepped_back(*, action: str, **kwargs: Any) -> None:
    CLOCK_STEPS_BACK.labels(action).inc()


def _clock_moved(*, database: str, how: str, **kwargs: Any) -> None:
    DATABASE_CLOCK_MOVES.labels(database, how).inc()


RECEIVERS = (
    (signals.lease_claimed, _claimed),
    (signals.lease_renewed, _renewed),
    (signals.lease_renewal_failed, _renewal_failed),
    (signals.lease_lost, _lost),
    (signals.failover_seen, _failover),
    (signals.clock_moved_backwards, _stepped_back),
    (signals.database_clock_moved, _clock_moved),
)


def install() -> None:
    """Connect the receivers (``MetricsConfig.ready()`` does), and add
    :class:`DatabaseClockCollector` to the default registry outside multiprocess mode."""
    for signal, receiver in RECEIVERS:
        signal.connect(receiver, dispatch_uid=f"django_snowflake.metrics.{receiver.__name__}")
    if not multiprocess_mode() and _database_clocks not in _registered(REGISTRY):
        REGISTRY.register(_database_clocks)


def uninstall() -> None:
    """Disconnect what :func:`install` connected (the benchmarks compare both)."""
    for signal, receiver in RECEIVERS:
        signal.disconnect(dispatch_uid=f"django_snowflake.metrics.{receiver.__name__}")
    if _database_clocks in _registered(REGISTRY):
        REGISTRY.unregister(_database_clocks)


def _registered(registry: CollectorRegistry) -> list[Collector]:
    return list(registry._collector_to_names)


def multiprocess_mode() -> bool:
    """Whether ``prometheus_client`` writes values to ``PROMETHEUS_MULTIPROC_DIR``."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class DatabaseClockCollector(Collector):
    """``snowflake_database_clock_lag_seconds{database, clock}``: how far the time of each
    database function's last key is behind the server's clock, read at each scrape (one query
    per database with a function of its own). Where the heartbeats move the clock (MariaDB's
    column default, ``clock="heartbeats"``) it stays under a second; PostgreSQL's function
    (``clock="function"``) catches up as it draws, so there it grows while the database issues
    no key."""

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "snowflake_database_clock_lag_seconds",
            "How far the time of the database function's last key is behind the server's clock.",
            labels=["database", "clock"],
        )

    def describe(self) -> Iterator[Metric]:
        # What the registry reads when the collector is registered (in AppConfig.ready(),
        # perhaps in an async server's event loop): the names alone, no query.
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        from .database_keys import function_report
        from .vendors import database_class

        lag = self._family()
        for alias in connections:
            try:
                report = function_report(alias)
            except DatabaseError:
                continue
            if report is None or report.get("behind_ms") is None:
                continue
            clock_behind(alias, report["behind_ms"])  # the signal, if late
            moved = database_class(connections[alias]).moves_clock
            lag.add_metric(
                [alias, "heartbeats" if moved else "function"], report["behind_ms"] / 1000
            )
        yield lag


_database_clocks = DatabaseClockCollector()


def registry() -> CollectorRegistry:
    """The registry a scrape reads: every worker's files in multiprocess mode (with the
    database clocks), else the default registry."""
    if not multiprocess_mode():
        return REGISTRY
    collected = CollectorRegistry()
    multiprocess.MultiProcessCollector(collected)  # type: ignore[no-untyped-call]
    collected.register(_database_clocks)
    return collected


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The metrics in Prometheus's text format (``path("metrics", metrics_view)``)."""
    record_generator()
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)


class MetricsConfig(AppConfig):
    """``INSTALLED_APPS`` entry ``"django_snowflake.metrics.MetricsConfig"``: installs the
    metrics at start-up, in every process (each gunicorn worker too)."""

    name = "django_snowflake.metrics"
    label = "snowflake_metrics"
    verbose_name = "Snowflake metrics"

    def ready(self) -> None:
        install()
