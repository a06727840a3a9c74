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


#: The first act of a fresh process under CLAIM_ON_READY (tests/worker_process.py, first).
FIRST_ACTS = ["id", "model", "connection", "request", "thread", "async"]


#: An allocator whose queries run on the thread that asks for a slot (tests/slots.py).
CALLER_THREAD = {"WORKER_ALLOCATOR": "tests.slots.CallerThreadAllocator"}


@pytest.mark.parametrize(
    ("order", "allocator"),
    [
        *(pytest.param(order, {}, id=order) for order in FIRST_ACTS),
        pytest.param("id", CALLER_THREAD, id="id-caller-thread-allocator"),
        pytest.param("thread", CALLER_THREAD, id="thread-caller-thread-allocator"),
    ],
)
def test_claim_on_ready_first_id(spawn: Any, order: str, allocator: dict[str, str]) -> None:
    # Issue 27: the first ID held the generator and waited for the claim's thread, whose
    # connection_created ran the claim-after-start-up handler, which waited for the generator
    # (with the claim on the caller's thread, the handler and SQLite's BEGIN hook waited for
    # their own thread). The child prints its threads' stacks and exits if it has no ID in 5 s.
    process = spawn(
        "first",
        "--order",
        order,
        "--within",
        "5",
        snowflake={"CLAIM_ON_READY": True, **allocator},
        python=["-W", "error"],
    )
    expect_line(process, "ready", timeout=60)
    words = expect_line(process, "id")
    assert int(words[1]) > 0 and float(words[2]) < 5
    assert process.wait(timeout=60) == 0
