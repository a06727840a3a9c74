"""Django settings of the benchmarks: one alias per database under test.

The servers are the test suite's (``harness.databases.SERVER_DEFAULTS``, with the same
``SNOWFLAKE_TEST_DB_HOST``, ``_PORT``, ``_USER`` and ``_PASSWORD`` overrides), but the
databases are the benchmarks' own, created and dropped by the runner:
``snowflake_bench`` (``SNOWFLAKE_BENCH_NAME``) on PostgreSQL and MariaDB, and SQLite files
in ``SNOWFLAKE_BENCH_DIR`` (default: a directory under the system's temporary directory).
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.databases import SERVER_DEFAULTS

BENCH_NAME = os.environ.get("SNOWFLAKE_BENCH_NAME", "snowflake_bench")
BENCH_DIR = Path(
    os.environ.get("SNOWFLAKE_BENCH_DIR", Path(tempfile.gettempdir()) / "snowflake_bench")
)


def server(vendor: str, name: str) -> dict[str, Any]:
    conf = copy.deepcopy(SERVER_DEFAULTS[vendor])
    conf.pop("TEST", None)
    conf["NAME"] = name
    for key in ("HOST", "PORT", "USER", "PASSWORD"):
        conf[key] = os.environ.get(f"SNOWFLAKE_TEST_DB_{key}", conf[key])
    return conf


def sqlite(name: str) -> dict[str, Any]:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(BENCH_DIR / f"{name}.sqlite3"),
        "OPTIONS": {"timeout": 60},
    }


DATABASES = {
    # The WorkerNode table of the runner itself: a file of its own, so that its lease
    # renewals never wait for the SQLite file a load holds locked.
    "default": sqlite("workers"),
    "sqlite": sqlite(BENCH_NAME),
    "postgresql": server("postgresql", BENCH_NAME),
    # A copy of a table preloaded with 5,000,000 rows, made afresh for every load.
    "postgresql_5m": server("postgresql", f"{BENCH_NAME}_5m_run"),
    "mariadb": server("mariadb", BENCH_NAME),
}

SECRET_KEY = "django_snowflake-benchmarks-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_snowflake", "benchmarks.benchapp", "benchmarks.switchapp"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The database allocator, as in production. The claim benchmark's processes lease from the
# database named by SNOWFLAKE_BENCH_WORKERS.
SNOWFLAKE = {
    "WORKER_ALLOCATOR": "database",
    "DATABASE": os.environ.get("SNOWFLAKE_BENCH_WORKERS", "default"),
}
