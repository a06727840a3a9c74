"""gunicorn's settings for the example shop: ``gunicorn -c gunicorn.conf.py config.wsgi``
from this directory, with ``PROMETHEUS_MULTIPROC_DIR`` set to an empty directory of its own
for the metrics of several workers (docs: "Monitoring")."""

from __future__ import annotations

import os
from typing import Any

workers = int(os.environ.get("GUNICORN_WORKERS", 2))
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")


def child_exit(server: Any, worker: Any) -> None:
    """A worker's gauges (its lease) leave the scrape with it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
