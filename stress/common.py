"""What the scenarios share: the databases they run on, subprocess environments, reports."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import ROOT
from harness.databases import SERVER_DEFAULTS
from harness.private_server import PrivateServer, free_port

__all__ = ["ROOT", "Database", "PrivateServer", "free_port"]

VENDORS = ("sqlite", "postgresql", "mariadb")


def log(*words: object) -> None:
    print(time.strftime("%H:%M:%S"), *words, file=sys.stderr, flush=True)


@dataclass
class Database:
    """A database the scenario's processes reach through ``tests.settings``'s variables."""

    vendor: str
    name: str
    host: str = ""
    port: str = ""
    user: str = ""
    server: PrivateServer | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def env(self, snowflake: dict[str, Any] | None = None, **more: str) -> dict[str, str]:
        """The environment of a process on this database, with ``tests.settings``."""
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(ROOT),
            "SNOWFLAKE_TEST_DB": self.vendor,
            "SNOWFLAKE_TEST_DB_NAME": self.name,
            "SNOWFLAKE_TEST_SETTINGS": json.dumps(snowflake or {}),
            **self.extra,
            **more,
        }
        if self.vendor != "sqlite":
            env.update(
                SNOWFLAKE_TEST_DB_HOST=self.host,
                SNOWFLAKE_TEST_DB_PORT=self.port,
                SNOWFLAKE_TEST_DB_USER=self.user,
                SNOWFLAKE_TEST_DB_PASSWORD="",
            )
        return env

    def migrate(self, *apps: str) -> None:
        """Create the tables (``django_snowflake`` alone unless ``apps`` says otherwise)."""
        command = [sys.executable, "-m", "django", "migrate", *(apps or ["django_snowflake"])]
        subprocess.run([*command, "-v0"], cwd=ROOT, env=self.env(), check=True)
        # Every row goes, through the vendor's client rather than Django: the slot leased to
        # the database's own key function, and on SQLite the slot that a Django process
        # claims as its connection opens (migrate's own, released but kept, under the
        # default layout, which the runs' layouts would be refused by).
        self.sql("DELETE FROM django_snowflake_workernode")

    def sql(self, query: str) -> list[list[str]]:
        """Rows of ``query`` as text, through the vendor's command-line client."""
        if self.vendor == "sqlite":
            import sqlite3

            # Autocommit: the module would otherwise leave a DELETE uncommitted at close.
            connection = sqlite3.connect(self.name, timeout=30, isolation_level=None)
            with contextlib.closing(connection) as db:
                return [[str(v) for v in row] for row in db.execute(query).fetchall()]
        if self.vendor == "postgresql":
            command = [
                "psql",
                "-h",
                self.host,
                "-p",
                self.port,
                "-U",
                self.user,
                "-d",
                self.name,
                "-AtF",
                "\t",
                "-c",
                query,
            ]
        else:
            command = [
                "mariadb",
                f"-h{self.host}",
                f"-P{self.port}",
                f"-u{self.user}",
                "-N",
                "-B",
                self.name,
                "-e",
                query,
            ]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        return [line.split("\t") for line in output.splitlines() if line]


@contextlib.contextmanager
def private_database(
    vendor: str, root: Path, *, max_connections: int | None = None
) -> Iterator[Database]:
    """A database this run owns: a SQLite file in ``root``, or a private server it may kill.

    The private servers (``harness/private_server.py``) listen on a free loopback port in a
    temporary directory; the shared servers on 5432 and 3306 are never touched.
    """
    if vendor == "sqlite":
        yield Database("sqlite", str(root / "stress.sqlite3"))
        return
    server = PrivateServer(vendor)
    try:
        if max_connections and vendor == "postgresql":
            with open(server.data / "postgresql.conf", "a") as conf:
                conf.write(f"\nmax_connections = {max_connections}\n")
        server.start()
        server.create_database("stress")
        yield Database(vendor, "stress", "127.0.0.1", str(server.port), server.user, server=server)
    finally:
        server.close()


@contextlib.contextmanager
def shared_database(vendor: str, root: Path) -> Iterator[Database]:
    """A throwaway database on the shared server of ``vendor`` (SQLite: a file in ``root``),
    dropped afterwards."""
    if vendor == "sqlite":
        yield Database("sqlite", str(root / "stress.sqlite3"))
        return
    conf = SERVER_DEFAULTS[vendor]
    name = f"stress_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = Database(
        vendor,
        "postgres" if vendor == "postgresql" else "mysql",
        conf["HOST"],
        conf["PORT"],
        conf["USER"],
    )
    charset = "" if vendor == "postgresql" else " CHARACTER SET utf8mb4"
    admin.sql(f"CREATE DATABASE {name}{charset}")
    try:
        yield Database(vendor, name, conf["HOST"], conf["PORT"], conf["USER"])
    finally:
        if vendor == "postgresql":
            admin.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        else:
            admin.sql(f"DROP DATABASE IF EXISTS {name}")


@contextlib.contextmanager
def work_dir(keep: bool = False, prefix: str = "snowflake-stress-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, round(fraction * len(sorted_values) + 0.4999))
    return sorted_values[min(rank, len(sorted_values)) - 1]


FORGET_DATABASE_SLOT = """
from django_snowflake.database_slots import DATABASE_HOST
from django_snowflake.models import WorkerNode
WorkerNode.objects.filter(host_name=DATABASE_HOST).delete()
"""


def forget_database_slot(env: dict[str, str]) -> None:
    """Delete the slot that ``migrate`` leases to the database's own key function.

    These runs hunt the processes' claims on an empty worker table, and they run under
    layouts of their own, which the slot's (the default settings') would refuse. None of them
    has the database make a key outside the slot's worker ID, which stays in the function.
    """
    command = [sys.executable, "-m", "django", "shell", "-v0", "-c", FORGET_DATABASE_SLOT]
    subprocess.run(command, cwd=ROOT, env=env, check=True)
