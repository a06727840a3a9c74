"""The package's errors carry their numbers as attributes, and each reason is raised for real.

``WorkerLeaseLost`` reasons raised elsewhere in the suite are asserted there:
``NO_FREE_SLOT`` in test_lease_races, ``DATABASE_BLOCKED`` in test_user_test_suites, the
clock sequence's ``DATABASE_ERROR`` in test_worker_lease, ``FAILOVER`` in test_failover.
"""

from __future__ import annotations

import ast
import ctypes
import json
import os
import pickle
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, connection
from django.test import override_settings

import django_snowflake
from django_snowflake import generate, get_generator
from django_snowflake.allocators import database
from django_snowflake.allocators.database import DatabaseAllocator
from django_snowflake.checks import check_settings
from django_snowflake.exceptions import (
    BulkLoadError,
    ClockMovedBackwards,
    ClockOffsetTooLarge,
    ClockOutsideLifespan,
    GeneratorClosed,
    InvalidSnowflake,
    LayoutMismatch,
    NotSupported,
    NoWorkerAvailable,
    SnowflakeError,
    WorkerLeaseLost,
)
from django_snowflake.generator import POLICIES, SnowflakeGenerator
from django_snowflake.layout import BitLayout
from django_snowflake.models import WorkerNode
from django_snowflake.testing import driven_clock
from harness import private_server

from .generators import CLOCK_SEQUENCE_LAYOUTS, make

Lost = WorkerLeaseLost
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="fork() is POSIX")


def facts(error: WorkerLeaseLost) -> dict[str, Any]:
    """The error's reason and facts, as JSON can carry them out of a child process."""
    return {
        "type": type(error).__name__,
        "reason": error.reason,
        "worker_id": error.worker_id,
        "pid": error.pid,
        "parent_pid": error.parent_pid,
        "message": str(error),
    }


def in_child(issue: Callable[[], object], fork: Callable[[], int] = os.fork) -> dict[str, Any]:
    """Fork, call ``issue`` in the child, and return the facts of the ``WorkerLeaseLost`` it
    raised (``{"type": ...}`` of anything else)."""
    time.sleep(0.002)  # past the last ID's time unit: the child's first ID is not lock-free
    read, write = os.pipe()
    pid = fork()
    if pid == 0:
        os.close(read)
        try:
            issue()
            outcome: dict[str, Any] = {"type": "issued"}
        except WorkerLeaseLost as exc:
            outcome = {**facts(exc), "child": os.getpid()}
        except BaseException as exc:
            outcome = {"type": type(exc).__name__, "message": str(exc)}
        os.write(write, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return outcome


# Forks.


@posix_only
def test_forked_a_fixed_worker_generator() -> None:
    generator = SnowflakeGenerator(BitLayout.preset("twitter"), 3)
    generator.next_id()
    outcome = in_child(generator.next_id)
    assert outcome["reason"] == Lost.FORKED and outcome["type"] == "WorkerLeaseLost"
    assert (outcome["worker_id"], outcome["parent_pid"]) == (3, os.getpid())
    assert outcome["pid"] == outcome["child"] != os.getpid()
    assert outcome["message"].startswith(
        f"Worker ID 3 was given to process {os.getpid()}; process {outcome['pid']} is a fork"
    )
    generator.next_id()  # the parent goes on


@posix_only
def test_forked_the_static_allocator(settings: Any) -> None:
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 5}
    generate()
    outcome = in_child(generate)
    assert outcome["reason"] == Lost.FORKED
    assert (outcome["worker_id"], outcome["parent_pid"]) == (5, os.getpid())
    assert 'WORKER_ALLOCATOR = "database"' in outcome["message"]


@posix_only
def test_forked_without_hooks() -> None:
    generator = SnowflakeGenerator(BitLayout.preset("twitter"), 6)
    generator.next_id()
    outcome = in_child(generator.next_id, fork=ctypes.CDLL(None).fork)
    assert outcome["reason"] == Lost.FORKED_WITHOUT_HOOKS
    assert (outcome["worker_id"], outcome["parent_pid"]) == (6, os.getpid())
    assert outcome["pid"] == outcome["child"]
    assert f"fork of process {os.getpid()}" in outcome["message"]
    assert "its parent's worker slot 6" in outcome["message"]


# A closed generator and allocator.


def test_closed_generator_and_closed_static_allocator(settings: Any) -> None:
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 5}
    old = get_generator()
    old.next_id()
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 6}  # closes the old one
    with pytest.raises(GeneratorClosed) as raised:
        old.next_id()
    assert isinstance(raised.value, WorkerLeaseLost) and isinstance(raised.value, SnowflakeError)
    assert (raised.value.reason, raised.value.worker_id) == (Lost.CLOSED, 5)
    assert "closed and its worker slot released (worker ID 5)" in str(raised.value)
    # A new generator on the old, closed allocator: the allocator refuses.
    assert old.lease_source is not None
    again = SnowflakeGenerator(old.layout, lease_source=old.lease_source)
    with pytest.raises(GeneratorClosed) as raised:
        again.next_id()
    assert (raised.value.reason, raised.value.worker_id) == (Lost.CLOSED, 5)
    assert raised.value.pid == os.getpid()


# The database allocator.


@pytest.mark.django_db(transaction=True)
def test_database_error_while_claiming(
    database_generator: Callable[..., SnowflakeGenerator], monkeypatch: pytest.MonkeyPatch
) -> None:
    database_generator()
    unreachable = {"NAME": "/nonexistent/db.sqlite3"}
    if connection.vendor != "sqlite":
        unreachable = {"HOST": "127.0.0.1", "PORT": str(private_server.free_port())}
    for key, value in unreachable.items():
        monkeypatch.setitem(connection.settings_dict, key, value)
    with pytest.raises(WorkerLeaseLost) as raised:
        generate()
    error = raised.value
    assert (error.reason, error.database, error.clock_sequence) == (
        Lost.DATABASE_ERROR,
        "default",
        None,
    )
    assert error.error is error.__cause__ and error.error is not None
    assert str(error).startswith("No worker lease: renewing or claiming a slot in the database")
    assert f"({error.error})" in str(error) and "manage.py migrate" in str(error)


@pytest.mark.django_db(transaction=True)
def test_claim_races_lost(
    database_generator: Callable[..., SnowflakeGenerator], monkeypatch: pytest.MonkeyPatch
) -> None:
    database_generator()

    def lose(*args: object) -> None:
        raise IntegrityError("another process inserted this worker ID first")

    monkeypatch.setattr(database, "MAX_CLAIM_ATTEMPTS", 3)
    monkeypatch.setattr(DatabaseAllocator, "_claim_once", lose)
    with pytest.raises(WorkerLeaseLost) as raised:
        generate()
    assert (raised.value.reason, raised.value.database, raised.value.attempts) == (
        Lost.CLAIM_RACES_LOST,
        "default",
        3,
    )
    assert "in the database 'default' in 3 attempts" in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_not_held(database_generator: Callable[..., SnowflakeGenerator]) -> None:
    allocator = database_generator(
        CLOCK_ROLLBACK="clock_sequence", CLOCK_SEQUENCE_BITS=2, WORKER_BITS=8
    ).lease_source
    assert isinstance(allocator, DatabaseAllocator)
    with pytest.raises(WorkerLeaseLost) as raised:
        allocator.persist_clock_sequence(2)  # before any claim
    assert (raised.value.reason, raised.value.clock_sequence) == (Lost.NOT_HELD, 2)
    assert str(raised.value).startswith("Clock sequence 2 could not be stored: this process")


@pytest.mark.django_db(transaction=True)
def test_taken_over_before_the_clock_sequence_is_stored(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    generator = database_generator(
        CLOCK_ROLLBACK="clock_sequence", CLOCK_SEQUENCE_BITS=2, WORKER_BITS=8, LEASE_SECONDS=30
    )
    with driven_clock(generator) as clock:
        generate()
        lease = generator.lease
        assert lease is not None
        rows = WorkerNode.objects.filter(
            worker_id=lease.worker_id, layout=generator.layout.fingerprint
        )
        assert rows.update(token="someone else") == 1
        clock.rewind(10)
        with pytest.raises(WorkerLeaseLost) as raised:
            generate()
    error = raised.value
    assert (error.reason, error.worker_id, error.clock_sequence, error.lease_seconds) == (
        Lost.TAKEN_OVER,
        lease.worker_id,
        1,
        30,
    )
    assert error.renewed_seconds_ago is not None and 0 <= error.renewed_seconds_ago < 30
    assert f"took over worker slot {lease.worker_id} (last renewed " in str(error)
    assert "a lease lasts 30 s" in str(error)
    assert generator.lease is None


# Clock errors.


#: Why each rollback policy raised, as the message says it.
WHY = {
    "raise": "which the 'raise' rollback policy never tolerates.",
    "wait": "more than the 'wait' rollback policy waits out (MAX_ROLLBACK_MS = 5).",
    "borrow": "more than the 'borrow' rollback policy runs ahead of it (MAX_ROLLBACK_MS = 5).",
    "clock_sequence": (
        "with every clock-sequence value spent, and by more than the 'clock_sequence' "
        "rollback policy then waits out (MAX_ROLLBACK_MS = 5)."
    ),
    "ring": (
        "to a time unit the 'ring' rollback policy holds no record of, and by more than the "
        "policy then waits out (MAX_ROLLBACK_MS = 5)."
    ),
}


def test_every_policy_has_its_reading() -> None:
    assert set(WHY) == set(POLICIES)


@pytest.mark.parametrize(("policy", "why"), WHY.items())
def test_clock_moved_backwards_reads_right_for_each_policy(policy: str, why: str) -> None:
    generator, clock = make(
        CLOCK_SEQUENCE_LAYOUTS["twitter_cs"], rollback=policy, max_rollback_ms=5
    )
    for _ in range(8):  # the clock_sequence policy raises once its values are spent
        generator.next_id()
        clock.rewind(100)
        try:
            generator.next_id()
        except ClockMovedBackwards as exc:
            error = exc
            break
    else:
        pytest.fail(f"the {policy!r} policy never raised")
    assert (error.policy, error.max_rollback_ms) == (policy, 5)
    assert 100 <= error.behind_ms < 110
    assert str(error) == (
        f"The clock moved backwards by {error.behind_ms} ms, {why} No ID was issued; retry "
        "once the clock has caught up, or fix the time source (NTP slewing, not stepping)."
    )


def test_clock_outside_lifespan_past_the_end_says_when_and_what_to_do() -> None:
    layout = BitLayout(time_bits=6, worker_bits=3, sequence_bits=2)
    generator, clock = make(layout, start_ms=0)
    clock.advance(layout.unit_start_ms(64) - clock())
    with pytest.raises(ClockOutsideLifespan) as raised:
        generator.next_id()
    error = raised.value
    assert (error.now_ms, error.epoch, error.end) == (
        clock(),
        layout.epoch_datetime,
        layout.lifespan_end,
    )
    now = datetime.fromtimestamp(clock() / 1000, tz=UTC).isoformat()
    assert str(error) == (
        f"The clock reads {clock()} ms since 1970 ({now}), past the end of the layout's "
        f"lifespan ({layout.epoch_datetime.isoformat()} to {layout.lifespan_end.isoformat()}); "
        "no ID can be issued. A test that moves time there needs a later epoch in its test "
        "settings; a deployment needs a new layout with more TIME_BITS."
    )


# Every error.


def test_a_worker_lease_lost_takes_only_its_reasons_and_facts() -> None:
    assert len(set(Lost.REASONS)) == 10
    with pytest.raises(ValueError, match="Unknown reason 'gone'"):
        Lost("gone")
    with pytest.raises(TypeError, match="takes no fact slot"):
        Lost(Lost.FORKED, slot=3)


ERRORS = [
    ClockMovedBackwards(9, policy="wait", max_rollback_ms=5),
    ClockOutsideLifespan(0, epoch=datetime(2025, 1, 1, tzinfo=UTC), end=datetime.max),
    ClockOffsetTooLarge(1500.0, lease_seconds=60, margin_ms=15_000),
    NoWorkerAvailable(active=4, capacity=4, worker_bits=2),
    Lost(Lost.TAKEN_OVER, worker_id=2, clock_sequence=1, renewed_seconds_ago=1.5, lease_seconds=9),
    Lost(Lost.DATABASE_ERROR, database="default", error=OSError("refused")),
    GeneratorClosed(worker_id=4),
    LayoutMismatch("a", "b"),
    InvalidSnowflake("not a Snowflake ID"),
    BulkLoadError("bulk_load cannot load shop.Order"),
    NotSupported("bulk_load", database="Oracle", alias="legacy"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_errors_survive_pickling_with_their_numbers(error: SnowflakeError) -> None:
    # Django's parallel test runner and multiprocessing send errors between processes.
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert {k: str(v) for k, v in vars(copy).items()} == {k: str(v) for k, v in vars(error).items()}


def test_every_error_class_of_the_package_is_documented_in_exceptions() -> None:
    import django_snowflake.exceptions as module

    defined = {
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert {type(error).__name__ for error in ERRORS} | {"SnowflakeError"} == defined


def test_no_public_error_is_defined_outside_exceptions() -> None:
    """What exceptions.py's docstring says: every error has its home there (private ones stay
    inside their module)."""
    package = Path(django_snowflake.__file__).parent
    found = set()
    for path in package.rglob("*.py"):
        if "migrations" in path.parts or path.name == "exceptions.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]
            if any(base.endswith(("Error", "Exception", "Warning")) for base in bases):
                found.add(f"{path.relative_to(package)}:{node.name}")
    assert found == set()


# The E014 and E023 checks share one builder: the messages and hints are those translated.


@pytest.mark.parametrize(
    ("snowflake", "message", "hint"),
    [
        (
            {"TIME_UNIT_MS": 3_600_000},
            "TIME_UNIT_MS 3600000 is longer than the 45000 ms a lease of LEASE_SECONDS 60 "
            "reserves ahead (three quarters of it): the database allocator could never issue "
            "an ID.",
            "Raise LEASE_SECONDS to 4800 or more, or lower TIME_UNIT_MS to 45000 or less.",
        ),
        (
            {"CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 3001, "LEASE_SECONDS": 4},
            "MAX_ROLLBACK_MS 3001 lets the 'borrow' policy run further ahead of the clock than "
            "the 3000 ms a lease of LEASE_SECONDS 4 reserves (three quarters of it): IDs would "
            "stall at the reservation's end instead of being borrowed.",
            "Lower MAX_ROLLBACK_MS to 3000 or less, or raise LEASE_SECONDS to 5 or more.",
        ),
    ],
)
def test_E014_E023_messages_and_hints(snowflake: dict[str, Any], message: str, hint: str) -> None:
    with override_settings(SNOWFLAKE=snowflake):
        (found,) = check_settings()
    assert (found.msg, found.hint) == (message, hint)
