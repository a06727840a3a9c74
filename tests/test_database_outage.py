"""A database that goes away mid-run: IDs stop before the lease ends and resume after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_snowflake.layout import BitLayout

from .conftest import ROOT
from .private_server import PrivateServer
from .test_worker_lease import read_ids, wait_line

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")

pytestmark = pytest.mark.skipif(
    VENDOR == "sqlite", reason="SQLite is a file in the process: it has no server to lose"
)


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    private = PrivateServer(VENDOR)
    try:
        private.start()
        private.create_database("outage")
        yield private
    finally:
        private.close()


def test_ids_stop_before_the_lease_ends_and_resume(server: PrivateServer, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_DB_HOST": "127.0.0.1",
        "SNOWFLAKE_TEST_DB_PORT": str(server.port),
        "SNOWFLAKE_TEST_DB_USER": server.user,
        "SNOWFLAKE_TEST_DB_NAME": "outage",
        "SNOWFLAKE_TEST_SETTINGS": json.dumps({"LEASE_SECONDS": 3}),
    }
    migrate = [sys.executable, "-m", "django", "migrate", "django_snowflake", "-v0"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True)
    out, stop = tmp_path / "ids", tmp_path / "stop"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.worker_process",
            "outage",
            "--out",
            str(out),
            "--go",
            str(stop),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_line(worker, "claimed")
        lease_end = lease_expiry_ms(server)
        server.kill()
        wait_line(worker, "stopped", timeout=10)
        issued_while_away = read_ids(out)
        server.start()
        wait_line(worker, "resumed", timeout=20)
        stop.touch()
        wait_line(worker, "done")
        assert worker.wait(timeout=30) == 0
    finally:
        worker.kill()
        worker.wait()
    layout = BitLayout.preset("twitter")
    last_before = layout.decompose(issued_while_away[-1]).timestamp.timestamp() * 1000
    # The holder stops a margin before its lease ends in the database, which then lets
    # another process take the slot: no ID of this holder can meet one of the next.
    assert last_before < lease_end
    ids = read_ids(out)
    assert len(ids) > len(issued_while_away)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def lease_expiry_ms(server: PrivateServer) -> float:
    """The holder's lease end in ms, read from the private server just before it dies.

    A renewal landing between this read and the kill only moves the real end later, so
    comparing against this value is the stricter test.
    """
    query = "SELECT {} FROM django_snowflake_workernode WHERE released_at IS NULL".format(
        "EXTRACT(EPOCH FROM lease_expires_at) * 1000"
        if server.vendor == "postgresql"
        else "UNIX_TIMESTAMP(CONVERT_TZ(lease_expires_at, '+00:00', @@session.time_zone)) * 1000"
    )
    if server.vendor == "postgresql":
        command = ["psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "-d",
                   "outage", "-Atc", query]  # fmt: skip
    else:
        command = [
            "mariadb",
            "-h127.0.0.1",
            f"-P{server.port}",
            "-uroot",
            "-N",
            "outage",
            "-e",
            query,
        ]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(output.strip())
