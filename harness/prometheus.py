"""A private Prometheus server (Debian's ``prometheus``) scraping targets on the loopback, and
its HTTP API, for the monitoring tests.

It lives in its own temporary directory (configuration and time-series database) on a free
loopback port, scrapes every second, and is killed at :meth:`close`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from .private_server import free_port

BINARY = "/usr/bin/prometheus"


def missing() -> str:
    """What this machine lacks to run Prometheus; ``""`` when nothing."""
    return "" if Path(BINARY).exists() else "prometheus (Debian's package)"


class Prometheus:
    """Prometheus scraping ``targets`` (``host:port``) at ``metrics_path`` each second."""

    def __init__(self, targets: list[str], *, metrics_path: str = "/metrics") -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="snowflake-prometheus-"))
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
            "scrape_configs": [
                {
                    "job_name": "example",
                    "metrics_path": metrics_path,
                    "static_configs": [{"targets": targets}],
                }
            ],
        }
        # JSON is YAML: no YAML writer needed.
        (self.root / "prometheus.yml").write_text(json.dumps(config))
        self.log = self.root / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            BINARY,
            f"--config.file={self.root / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.root / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"prometheus did not get ready: {self.log.read_text()[-2000:]}")

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The instant vector of ``expression`` now: each series' ``metric`` (its labels) and
        ``value`` (a float)."""
        query = urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=5) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return [
            {"metric": entry["metric"], "value": float(entry["value"][1])}
            for entry in body["data"]["result"]
        ]

    def value(self, expression: str) -> float | None:
        """The one value of ``expression`` now (``None``: no series)."""
        result = self.query(expression)
        assert len(result) <= 1, result
        return result[0]["value"] if result else None

    def targets_up(self) -> bool:
        """Whether the last scrape of every target succeeded."""
        up = self.query("up")
        return bool(up) and all(entry["value"] == 1 for entry in up)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
