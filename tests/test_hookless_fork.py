"""A fork that skips Python's fork hooks (uWSGI forks its workers in C after loading the
application) must not issue from its parent's worker slot: it shared the slot silently."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import pytest

from django_snowflake import generate
from django_snowflake.exceptions import WorkerLeaseLost
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.layout import BitLayout

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork() is POSIX")


def child_exit_code(issue: Callable[[], int]) -> int:
    """Fork with libc's fork(), which runs none of os.register_at_fork's hooks; in the child,
    try to issue: 0 when refused with the fix named, 1 when it issued, 2 otherwise."""
    time.sleep(0.002)  # past the last ID's time unit: the child's first ID is not lock-free
    # PyDLL, not CDLL: CDLL lets go of the GIL around the call, and a thread of the parent
    # (the heartbeat) that takes it then holds it in the child, which hangs before any of its
    # Python runs, its alarm too (CI on ecf9a59: the parent waited pytest-timeout's 600 s).
    pid = ctypes.PyDLL(None).fork()
    if pid == 0:
        # A child that hangs (a lock a thread of the parent held at the fork) dies in 20 s:
        # the test fails then, not at pytest-timeout's ten minutes.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's handler
        signal.alarm(20)
        try:
            issue()
            code = 1
        except WorkerLeaseLost as exc:
            code = 0 if "py-call-uwsgi-fork-hooks" in str(exc) else 2
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the child hung (killed by signal {os.WTERMSIG(status)})"
    return os.waitstatus_to_exitcode(status)


def test_a_fixed_worker_generator() -> None:
    generator = SnowflakeGenerator(BitLayout.preset("twitter"), 3)
    generator.next_id()
    assert child_exit_code(generator.next_id) == 0
    generator.next_id()  # the parent goes on


@pytest.mark.django_db(transaction=True)
def test_the_database_allocators_generator(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    generator = database_generator()
    generate()
    assert generator.lease is not None
    assert child_exit_code(generate) == 0
    generate()


def test_a_lock_a_thread_of_the_parent_held_at_the_fork_does_not_hang_the_child() -> None:
    """The heartbeat may hold the generator's lock at the instant of a fork; no thread of the
    child ever releases it. The child must refuse, not wait for it (it hung in CI's 5.2
    MariaDB row until pytest-timeout stopped it; before a405ecd this test's child hangs)."""
    generator = SnowflakeGenerator(BitLayout.preset("twitter"), 3)
    generator.next_id()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with generator._lock:
            held.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    try:
        assert child_exit_code(generator.next_id) == 0
    finally:
        release.set()
        thread.join()
    generator.next_id()  # the parent goes on
