"""Readiness, the database check, the views, django-health-check's checks and the metrics,
in this process (tests/test_prometheus.py runs them for real under gunicorn and Prometheus)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import RequestFactory
from prometheus_client import REGISTRY

from django_snowflake import generate, generate_many, get_generator
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.health import (
    database_health,
    health_view,
    readiness,
    readiness_view,
)
from django_snowflake.layout import BitLayout
from django_snowflake.testing import driven_clock
from django_snowflake.vendors import database_class

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")


def test_issued_counts_every_id_the_fast_path_included() -> None:
    generator = SnowflakeGenerator(BitLayout.preset("twitter"), worker_id=1)
    ids = [generator.next_id() for _ in range(50_000)]
    ids += generator.next_ids(10_000)
    assert generator.issued == len(ids) == len(set(ids))


def test_issued_under_contending_threads() -> None:
    generator = SnowflakeGenerator(BitLayout.preset("twitter"), worker_id=1)
    threads = [
        threading.Thread(target=lambda: [generator.next_id() for _ in range(20_000)])
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # An ID dropped in a race with the window's closing is spent and counted: a few more.
    assert 80_000 <= generator.issued <= 80_000 + 100


@pytest.fixture
def leased(database_generator: Callable[..., SnowflakeGenerator]) -> SnowflakeGenerator:
    return database_generator(LEASE_SECONDS=3)


@pytest.mark.django_db(transaction=True)
def test_readiness_follows_the_lease(leased: SnowflakeGenerator) -> None:
    before = readiness()
    assert not before.ready and "No worker slot" in before.reason  # it never claims
    assert leased.lease is None
    generate()
    verdict = readiness()
    assert verdict.ready and verdict.worker_id == leased.worker_id
    assert verdict.seconds_left is not None and 1.5 < verdict.seconds_left <= 2.25
    with driven_clock(leased) as clock:
        clock.advance(1600)  # renewals did not land: 0.65 s left, under a quarter of 3 s
        late = readiness()
    assert not late.ready and late.seconds_left is not None and 0 < late.seconds_left < 0.75
    assert "not being renewed" in late.reason


def test_readiness_without_end_and_with_a_clock_behind(settings: Any) -> None:
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 3}
    generator = get_generator()
    generator.ensure_lease()
    verdict = readiness()
    assert verdict.ready and verdict.seconds_left is None  # a static slot never lapses
    with driven_clock(generator) as clock:
        generate()
        clock.rewind(50)
        behind = readiness()
    assert not behind.ready and "50 ms behind" in behind.reason


def test_readiness_never_waits_for_the_generator(settings: Any) -> None:
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 3}
    generator = get_generator()
    generator.ensure_lease()
    with generator._lock:  # another thread inside an ID
        assert readiness().ready


@pytest.mark.django_db(transaction=True)
def test_the_views(leased: SnowflakeGenerator) -> None:
    request = RequestFactory().get("/ready/")
    assert readiness_view(request).status_code == 503
    generate()
    response = readiness_view(request)
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]
    health = health_view(RequestFactory().get("/health/"))
    assert health.status_code == 200, health.content


@pytest.mark.django_db(transaction=True)
def test_database_health_lists_the_databases_with_a_function_of_their_own() -> None:
    found = database_health()
    if VENDOR == "sqlite":
        assert found == []  # SQLite's function is the process's generator
    else:
        [entry] = [item for item in found if item.database == "default"]
        assert entry.healthy and entry.report["installed"], entry


@pytest.mark.django_db(transaction=True)
def test_the_django_health_check_checks(leased: SnowflakeGenerator) -> None:
    from django_snowflake.healthchecks import DatabaseKeys, Readiness

    not_yet = asyncio.run(Readiness().get_result())
    assert not_yet.error is not None and "No worker slot" in str(not_yet.error)
    generate()
    assert asyncio.run(Readiness().get_result()).error is None
    assert asyncio.run(DatabaseKeys().get_result()).error is None
    connection.close()


@pytest.fixture
def metrics() -> Iterator[Any]:
    from django_snowflake import metrics

    metrics.install()
    try:
        yield metrics
    finally:
        metrics.uninstall()


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.django_db(transaction=True)
def test_metrics_of_a_claim_ids_and_waits(leased: SnowflakeGenerator, metrics: Any) -> None:
    claims = sample("snowflake_lease_claim_seconds_count")
    issued = sample("snowflake_ids_issued_total")
    generate_many(10_000)  # at least two time units: a wait for the next one
    for _ in range(1_000):
        generate()
    assert sample("snowflake_lease_claim_seconds_count") == claims + 1
    response = metrics.metrics_view(RequestFactory().get("/metrics"))
    text = response.content.decode()
    assert sample("snowflake_ids_issued_total") == issued + 11_000
    assert sample("snowflake_generator_waits_total", cause="sequence") >= 1
    assert sample("snowflake_lease_seconds_left") > 1
    assert "snowflake_lease_limit_timestamp_seconds" in text
    assert response["Content-Type"].startswith("text/plain")
    if VENDOR != "sqlite":
        clock = "heartbeats" if database_class(connection).moves_clock else "function"
        assert f'snowflake_database_clock_lag_seconds{{clock="{clock}",database="default"}}' in text


@pytest.mark.django_db(transaction=True)
def test_metrics_of_renewals(leased: SnowflakeGenerator, metrics: Any) -> None:
    renewed = sample("snowflake_lease_renewals_total", outcome="ok")
    generate()
    with driven_clock(leased):
        pass
    deadline = 50
    while sample("snowflake_lease_renewals_total", outcome="ok") == renewed and deadline:
        threading.Event().wait(0.1)  # the heartbeat renews each second
        deadline -= 1
    assert sample("snowflake_lease_renewals_total", outcome="ok") > renewed


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's function is the process's: nothing to read"
)
def test_registering_the_database_clocks_runs_no_query() -> None:
    """prometheus_client registers a collector by its describe() (else it collects once), in
    MetricsConfig.ready(), which an ASGI server may run in its event loop: a query there
    raised SynchronousOnlyOperation, and uvicorn never listened (CI's stress short form)."""
    from prometheus_client import CollectorRegistry

    from django_snowflake.metrics import DatabaseClockCollector

    registry = CollectorRegistry(auto_describe=True)  # as prometheus_client.REGISTRY

    async def register() -> None:
        registry.register(DatabaseClockCollector())

    asyncio.run(register())  # no database access allowed here either: a query would raise
