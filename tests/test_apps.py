"""The app's ``ready()``: whether a process claims its worker slot at start-up."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from django_snowflake.apps import claims_eagerly
from harness.processes import expect_line


@pytest.mark.parametrize(("claim_on_ready", "lease"), [(True, "0"), (False, "none")])
def test_claim_on_ready(spawn: Any, claim_on_ready: bool, lease: str) -> None:
    # Not inside ready(), where Django warns of any query ("Accessing the database during app
    # initialization is discouraged"): at the first request (or database connection).
    process = spawn("setup", snowflake={"CLAIM_ON_READY": claim_on_ready}, python=["-W", "error"])
    assert expect_line(process, "setup") == ["setup", "none"]
    assert expect_line(process, "lease") == ["lease", lease]
    assert process.wait(timeout=60) == 0


@pytest.mark.parametrize(
    ("argv", "eager"),
    [
        (["manage.py", "migrate"], False),
        (["manage.py", "makemigrations"], False),
        (["/srv/app/manage.py", "runserver"], False),  # the autoreloader's parent
        (["/srv/app/manage.py", "runserver", "--noreload"], True),
        (["gunicorn", "shop.wsgi"], True),
        (["celery", "-A", "shop", "worker"], True),
    ],
)
def test_claim_on_ready_skips_commands_without_the_table(
    argv: list[str], eager: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "pytest")
    assert claims_eagerly(argv) is eager
