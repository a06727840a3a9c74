from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from django_snowflake.conf import get_layout, get_settings
from django_snowflake.database_keys import move_database_clocks
from django_snowflake.database_slots import DATABASE_HOST, LEASE_END
from django_snowflake.models import WorkerNode
from django_snowflake.vendors import installed_slot

from .conftest import ROOT


def show_worker(*args: str) -> str:
    out = StringIO()
    call_command("show_worker", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db  # the report reads each server database's function
def test_text_report_with_the_static_allocator() -> None:
    text = show_worker()
    assert "| sign: 0 | time (41) | worker (10) | sequence (12) |" in text
    assert "allocator: static" in text
    assert "worker id: 0" in text
    assert "ids per second per worker: 4096000" in text
    assert "clock rollback: wait" in text


@pytest.mark.django_db(transaction=True)
def test_json_report_claims_and_shows_the_lease(settings: Any) -> None:
    settings.SNOWFLAKE = {"PROCESS_LABEL": "web"}
    report = json.loads(show_worker("--json", "--all"))
    # On PostgreSQL and MariaDB the database's own key function may hold a slot too.
    node = WorkerNode.objects.get(process_id=os.getpid())
    assert report["allocator"] == "database"
    assert report["worker_id"] == node.worker_id
    assert report["lease_expires_at"] == node.lease_expires_at.isoformat()
    assert report["label"] == "web"
    assert report["layout"]["fingerprint"] == node.layout
    assert report["lifespan_end"].startswith("2094-09-07")
    assert report["years_left"] > 60
    (mine,) = [slot for slot in report["slots"] if slot["process_id"] == os.getpid()]
    assert (mine["worker_id"], mine["state"]) == (node.worker_id, "active")


@pytest.mark.django_db(transaction=True)
def test_text_report_reads_as_words(settings: Any) -> None:
    settings.SNOWFLAKE = {"PROCESS_LABEL": "web"}
    lines = show_worker("--all").splitlines()
    (offset,) = [line for line in lines if line.startswith("clock offset ms: ")]
    # One decimal, never "-0.0".
    assert re.fullmatch(r"clock offset ms: -?\d+\.\d", offset) and offset != "clock offset ms: -0.0"
    assert "high water: none yet: no ID issued under this slot by this process" in lines
    assert not any("None" in line for line in lines)
    if connection.vendor == "sqlite":
        # No incarnation, so no "first seen" beside it.
        assert (
            "database incarnation: none: this database does not tell its servers apart (SQLite)"
            in lines
        )
        assert not any(line.startswith("incarnation first seen") for line in lines)
    else:
        assert any(line.startswith("incarnation first seen: ") for line in lines)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("label", ["database", "database:shard2"])
def test_a_database_slot_is_reserved_not_a_stuck_process(settings: Any, label: str) -> None:
    settings.SNOWFLAKE = {"PROCESS_LABEL": "web"}
    layout = get_layout()
    WorkerNode.objects.filter(worker_id=layout.max_worker_id).delete()
    WorkerNode.objects.create(
        worker_id=layout.max_worker_id,
        host_name=DATABASE_HOST,
        process_id=0,
        label=label,
        launched_at=timezone.now(),
        heartbeat_at=timezone.now(),
        lease_expires_at=LEASE_END,
        last_timestamp=0,
        layout=layout.fingerprint,
        token="database-test",
    )
    text = show_worker("--all")
    alias = label.partition(":")[2]
    reserved = (
        f"reserved for the database function of database {alias!r}, no heartbeat"
        if alias
        else "reserved for a database function, no heartbeat"
    )
    assert f"slot {layout.max_worker_id}/0 {reserved}" in text.splitlines()
    held = WorkerNode.objects.filter(lease_expires_at__gt=timezone.now()).count() - 1
    databases = f"1 reserved for the database function of {alias!r}"
    assert f"workers in use: {held} by processes, {1024 - held - 1} free, {databases}" in text
    report = json.loads(show_worker("--json", "--all"))
    assert report["workers_in_use"] == {
        "processes": held,
        "databases": [alias],
        "free": 1024 - held - 1,
    }
    (slot,) = [slot for slot in report["slots"] if slot["worker_id"] == layout.max_worker_id]
    assert slot["database"] == alias


def test_invalid_settings_are_a_one_line_error(settings: Any) -> None:
    settings.SNOWFLAKE = {"LAYOUT": "nope"}
    with pytest.raises(CommandError, match=r"E003.*manage.py check"):
        show_worker()


def show_worker_process(**env: str) -> subprocess.CompletedProcess[str]:
    """``django-admin show_worker`` in a fresh interpreter, with these environment variables."""
    return subprocess.run(
        [sys.executable, "-m", "django", "show_worker"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_command_line_error_has_no_traceback() -> None:
    result = show_worker_process(SNOWFLAKE_TEST_SETTINGS='{"WORKER_ALLOCATOR": "static"}')
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("CommandError:")
    assert "E031" in result.stderr


@pytest.fixture
def empty_database(django_db_setup: None, django_db_blocker: Any, tmp_path: Any) -> Iterator[str]:
    """The name of a database of the test server that ``migrate`` never ran on."""
    from django.db import connection

    if connection.vendor == "sqlite":
        yield str(tmp_path / "empty.sqlite3")
        return
    name = f"snowflake_unmigrated_{os.getpid()}"
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {name}")


def test_before_migrate_it_says_run_migrate_in_one_line(empty_database: str) -> None:
    # SNOWFLAKE {} is the database allocator.
    result = show_worker_process(
        SNOWFLAKE_TEST_DB_NAME=empty_database, SNOWFLAKE_TEST_SETTINGS="{}"
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "CommandError: The worker table django_snowflake_workernode does not exist in the "
        "database 'default' yet: run `python manage.py migrate` first."
    ]


@pytest.mark.django_db(transaction=True)
def test_each_database_function_where_it_lives_its_slot_and_its_clock() -> None:
    """Issue 25's "seen from outside": PostgreSQL's from its sequences, in ms behind the
    server's now; MariaDB's from its key sequence (n/a on the trigger path); SQLite's function
    is the process's generator."""
    if connection.vendor == "sqlite":
        assert json.loads(show_worker("--json"))["database_functions"] == []
        return
    with connection.cursor() as cursor:  # a key just made: the function's clock is now
        cursor.execute(
            "SELECT django_snowflake_id()" if connection.vendor == "postgresql" else "SELECT 1"
        )
    (found,) = json.loads(show_worker("--json"))["database_functions"]
    exists, slot = installed_slot("default")  # a flush between tests may have taken its row
    assert found["database"] == "default" and found["installed"] is exists is True
    assert slot is not None and found["slot"] == f"{slot[0]}/{slot[1]}"
    text = show_worker()
    if connection.vendor == "postgresql":
        assert found["where"] == "schema public"
        assert -1100 <= found["behind_ms"] <= 1000  # at most a second's lead ahead
        assert re.search(
            rf"function of database 'default': in schema public, slot {found['slot']}, "
            r"-?\d+ ms behind the server's clock",
            text,
        )
    elif get_settings()["MARIADB_KEYS"] == "trigger":
        assert found["behind_ms"] is None
        assert f"function of database 'default': in {found['where']}, slot" in text
        assert "clock n/a" in text
    else:
        # The default path's clock is the key sequence, which a heartbeat moves to the clock.
        move_database_clocks()
        (found,) = json.loads(show_worker("--json"))["database_functions"]
        assert -1100 <= found["behind_ms"] <= 1000, found
        assert re.search(r"-?\d+ ms behind the server's clock", show_worker())
