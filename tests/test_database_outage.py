"""A database that goes away mid-run: IDs stop before the lease ends and resume after.

On PostgreSQL and MariaDB a private server is killed and restarted. SQLite has no server to
lose; what takes it away from a process is another one holding the file's exclusive lock.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from django_snowflake.layout import BitLayout
from harness import ROOT
from harness.private_server import PrivateServer, running
from harness.processes import expect_line, read_ids, reap

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")

servers_only = pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite has no server to lose")


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    with running(VENDOR, "outage") as private:
        yield private


def start_worker(env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    """A process generating IDs into ``tmp_path / "ids"`` until ``tmp_path / "stop"`` exists,
    on the database of ``env``, migrated first; leases last 3 s."""
    env = {
        **os.environ,
        **env,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_SETTINGS": json.dumps({"LEASE_SECONDS": 3}),
    }
    migrate = [sys.executable, "-m", "django", "migrate", "django_snowflake", "-v0"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True)
    command = [sys.executable, "-m", "tests.worker_process", "outage"]
    command += ["--out", str(tmp_path / "ids"), "--go", str(tmp_path / "stop")]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def milliseconds(value: int) -> float:
    return BitLayout.preset("twitter").decompose(value).timestamp.timestamp() * 1000


@servers_only
def test_ids_stop_before_the_lease_ends_and_resume(server: PrivateServer, tmp_path: Path) -> None:
    env = {
        "SNOWFLAKE_TEST_DB_HOST": "127.0.0.1",
        "SNOWFLAKE_TEST_DB_PORT": str(server.port),
        "SNOWFLAKE_TEST_DB_USER": server.user,
        "SNOWFLAKE_TEST_DB_NAME": "outage",
    }
    out, stop = tmp_path / "ids", tmp_path / "stop"
    worker = start_worker(env, tmp_path)
    try:
        expect_line(worker, "claimed")
        lease_end = lease_expiry_ms(server)
        server.kill()
        expect_line(worker, "stopped", timeout=10)
        issued_while_away = read_ids(out)
        server.start()
        expect_line(worker, "resumed", timeout=20)
        stop.touch()
        expect_line(worker, "done")
        assert worker.wait(timeout=30) == 0
    finally:
        reap([worker])
    last_before = milliseconds(issued_while_away[-1])
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
    query = "SELECT {} FROM django_snowflake_workernode WHERE released_at IS NULL AND host_name <> '(database)'".format(
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


@pytest.mark.skipif(VENDOR != "sqlite", reason="the SQLite variant of the test above")
def test_ids_stop_before_the_lease_ends_while_sqlite_is_locked_and_resume(
    tmp_path: Path,
) -> None:
    path = tmp_path / "outage.sqlite3"
    out, stop = tmp_path / "ids", tmp_path / "stop"
    worker = start_worker(
        {"SNOWFLAKE_TEST_DB": "sqlite", "SNOWFLAKE_TEST_DB_NAME": str(path)}, tmp_path
    )
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        expect_line(worker, "claimed")
        time.sleep(0.5)  # issuing, and renewing every second
        locker.execute("BEGIN EXCLUSIVE")
        locked_at = time.time() * 1000
        (expires,) = locker.execute(
            "SELECT lease_expires_at FROM django_snowflake_workernode WHERE released_at IS NULL AND host_name <> '(database)'"
        ).fetchone()
        lease_end = datetime.fromisoformat(expires).replace(tzinfo=UTC).timestamp() * 1000
        # Hold the lock past the lease's end, within the busy timeout of the holder's
        # renewals and claim (20 s), which wait for it rather than fail.
        time.sleep((lease_end - locked_at) / 1000 + 2)
        unlocked_at = time.time() * 1000
        locker.execute("ROLLBACK")
        time.sleep(1)
        stop.touch()
        expect_line(worker, "done", timeout=30)
        assert worker.wait(timeout=30) == 0
    finally:
        locker.close()
        reap([worker])
    ids = read_ids(out)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    times = [milliseconds(value) for value in ids]
    # It kept issuing without the database for a while, stopped before its lease ended,
    # and went on once the lock was gone: nothing in between.
    assert any(locked_at + 500 < t < lease_end for t in times)
    assert not [t for t in times if lease_end <= t < unlocked_at - 1]
    assert any(t >= unlocked_at for t in times)
