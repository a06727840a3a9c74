from __future__ import annotations

import json
import os
import subprocess
import sys
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
    node = WorkerNode.objects.get()
    assert report["allocator"] == "database"
    assert report["worker_id"] == node.worker_id
    assert report["lease_expires_at"] == node.lease_expires_at.isoformat()
    assert report["label"] == "web"
    assert report["layout"]["fingerprint"] == node.layout
    assert report["lifespan_end"].startswith("2094-09-07")
    assert report["years_left"] > 60
    assert [slot["state"] for slot in report["slots"]] == ["active"]
    assert report["slots"][0]["process_id"] == os.getpid()


def test_invalid_settings_are_a_one_line_error(settings: Any) -> None:
    settings.SNOWFLAKE = {"LAYOUT": "nope"}
    with pytest.raises(CommandError, match=r"E003.*manage.py check"):
        show_worker()


def test_command_line_error_has_no_traceback() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_SETTINGS": '{"WORKER_ALLOCATOR": "static"}',
    }
    result = subprocess.run(
        [sys.executable, "-m", "django", "show_worker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("CommandError:")
    assert "E031" in result.stderr
