from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_snowflake.models import WorkerNode

from .conftest import ROOT


def show_worker(*args: str) -> str:
    out = StringIO()
    call_command("show_worker", *args, stdout=out)
    return out.getvalue()


def test_text_report_with_the_static_allocator() -> None:
    text = show_worker()
    assert "| 0  | time (41) | worker (10) | sequence (12) |" in text
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
