"""Operators can see it, with real components: Debian's Prometheus scrapes the example shop
served by gunicorn with two workers (prometheus_client's multiprocess mode) on a private
PostgreSQL. The database is stopped: through Prometheus's HTTP API the renewals fail and the
lease's time falls, and /ready/ turns 503 before the lease ends; the database comes back and
both recover. django-health-check's own ``manage.py health_check`` reports the package's checks.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import ROOT
from harness.private_server import PrivateServer, free_port, running
from harness.processes import reap
from harness.prometheus import Prometheus, missing

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")
LEASE_SECONDS = 6  # a renewal every 2 s, to 4.5 s ahead; not ready under 1.5 s left

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(VENDOR != "postgresql", reason="run on PostgreSQL (a private server)"),
]


def wait_for(what: str, condition: Callable[[], Any], timeout: float = 30) -> Any:
    """The first true value of ``condition()``, polled every 0.2 s for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Shop:
    """The example project under gunicorn, with its manage.py, on the private database."""

    def __init__(self, server: PrivateServer, tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        multiproc = tmp_path / "prometheus"
        multiproc.mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SNOWFLAKE_TEST")},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "PYTHONPATH": str(ROOT),
            "EXAMPLE_POSTGRES": f"127.0.0.1:{server.port}/shop",
            "EXAMPLE_LEASE_SECONDS": str(LEASE_SECONDS),
            "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
            "GUNICORN_WORKERS": "2",
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
        }
        self.log = tmp_path / "gunicorn.log"
        self.process: subprocess.Popen[bytes] | None = None

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``manage.py *args``, its metrics its own (not the server's directory)."""
        env = {k: v for k, v in self.env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT / "example_project",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self) -> None:
        # gunicorn's own script, as a deployment runs it: CLAIM_ON_READY claims in servers.
        gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent))
        assert gunicorn, "gunicorn is not installed (the stress extra)"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [gunicorn, "-c", "gunicorn.conf.py", "config.wsgi"],
                cwd=ROOT / "example_project",
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for("gunicorn", lambda: self.request("/ready/")[0] in (200, 503))

    def request(
        self, path: str, data: dict[str, Any] | None = None, timeout: float = 30
    ) -> tuple[int, Any]:
        """(status, JSON body or text) of a GET, or of a POST of ``data`` as the demo admin;
        (0, the error) when no answer came. The timeout is a loaded CI machine's: a POST
        checks the admin's password (PBKDF2, CPU-bound) and, in a worker's first request,
        claims its slot; it took over 5 s there once."""
        headers = {"Accept": "application/json"}
        body = None
        if data is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(b"admin:snowflake").decode()
            headers["Content-Type"] = "application/json"
            body = json.dumps(data).encode()
        request = urllib.request.Request(self.url + path, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        except OSError as error:
            return 0, repr(error)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def ready_answers(self, count: int = 8) -> list[tuple[int, Any]]:
        """``count`` answers of /ready/: the two workers take turns as the kernel hands out
        connections, so several answers cover both."""
        return [self.request("/ready/", timeout=5) for _ in range(count)]

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            finally:
                reap([self.process])


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    with running("postgresql", "shop") as private:
        yield private


@pytest.fixture
def shop(server: PrivateServer, tmp_path: Path) -> Iterator[Shop]:
    served = Shop(server, tmp_path)
    for command in (("migrate", "-v0"), ("seed_demo",)):
        done = served.manage(*command)
        assert done.returncode == 0, done.stdout + done.stderr
    try:
        served.start()
        yield served
    finally:
        served.close()


@pytest.fixture
def prometheus(shop: Shop) -> Iterator[Prometheus]:
    if missing():
        if os.environ.get("CI"):
            pytest.fail(f"missing: {missing()}")
        pytest.skip(f"missing: {missing()}")
    scraper = Prometheus([f"127.0.0.1:{shop.port}"])
    try:
        scraper.start()
        yield scraper
    finally:
        scraper.close()


def test_prometheus_sees_an_outage_and_the_recovery(
    server: PrivateServer, shop: Shop, prometheus: Prometheus
) -> None:
    # Orders through the API: IDs issued in both workers.
    status, orders = shop.request("/api/orders/")
    assert status == 200, orders
    customer = orders["results"][0]["customer"] if "results" in orders else orders[0]["customer"]
    for _ in range(20):
        status, created = shop.request("/api/orders/", {"customer": customer})
        assert status == 201, created

    # Both workers hold a lease (claimed at their first request) and are ready.
    wait_for("both workers' leases", lambda: prometheus.value(
        "count(snowflake_lease_limit_timestamp_seconds > 0)") == 2)  # fmt: skip
    assert prometheus.targets_up()
    wait_for("the IDs issued, counted at renewals and scrapes", lambda: (
        prometheus.value("sum(snowflake_ids_issued_total)") or 0) >= 20)  # fmt: skip
    assert prometheus.value("sum(snowflake_lease_claim_seconds_count)") == 2
    assert all(status == 200 for status, _ in shop.ready_answers())

    # django-health-check's own command asks the server for its page.
    done = shop.manage("health_check", "health_check", f"127.0.0.1:{shop.port}", "--forwarded-proto", "http")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Readiness" in done.stdout and "DatabaseKeys" in done.stdout, done.stdout

    # The database goes away.
    failed_before = prometheus.value('sum(snowflake_lease_renewals_total{outcome="failed"})') or 0
    server.kill()
    wait_for("renewal failures in Prometheus", lambda: (prometheus.value(
        'sum(snowflake_lease_renewals_total{outcome="failed"})') or 0) > failed_before, 10)  # fmt: skip
    left: list[float] = []
    not_ready: list[dict[str, Any]] = []

    def lease_falls_and_not_ready() -> bool:
        value = prometheus.value("min(snowflake_lease_seconds_left)")
        if value is not None and (not left or value != left[-1]):
            left.append(value)
        not_ready.extend(body for status, body in shop.ready_answers(2) if status == 503)
        return len(left) >= 3 and len(not_ready) >= 2

    wait_for("the lease time falling and /ready/ turning 503", lease_falls_and_not_ready, 15)
    assert left == sorted(left, reverse=True), left  # falling
    first = not_ready[0]
    # Not ready before the lease ends: time was left when /ready/ said so.
    assert first["ready"] is False and 0 < first["seconds_left"] <= LEASE_SECONDS / 4, first
    assert "lease" in first["reason"], first

    # The health page says so too, through django-health-check.
    done = shop.manage("health_check", "health_check", f"127.0.0.1:{shop.port}", "--forwarded-proto", "http")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr

    # The database comes back: renewals land (late), the lease time rises, ready again.
    server.start()
    wait_for("a late renewal in Prometheus", lambda: (prometheus.value(
        'sum(snowflake_lease_renewals_total{outcome="late"})') or 0) > 0, 20)  # fmt: skip
    wait_for("the lease time back up", lambda: (prometheus.value(
        "min(snowflake_lease_seconds_left)") or 0) > LEASE_SECONDS / 4, 20)  # fmt: skip
    wait_for("both workers ready", lambda: all(
        status == 200 for status, _ in shop.ready_answers()), 20)  # fmt: skip
    status, created = shop.request("/api/orders/", {"customer": customer})
    assert status == 201, created
    assert prometheus.targets_up()
