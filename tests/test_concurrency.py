"""One generator shared by threads (its lock-free path preempted at every step) and
inherited by forked children (which must not reuse the parent's worker ID)."""

from __future__ import annotations

import json
import operator
import os
import random
import signal
import threading
import warnings
from collections import Counter
from collections.abc import Callable
from unittest import mock

import pytest

from django_snowflake import generator as generator_module
from django_snowflake.exceptions import WorkerLeaseLost
from django_snowflake.generator import SnowflakeGenerator, system_clock
from django_snowflake.testing import FakeClock

from .generators import LAYOUTS, CountingSource, SystemTime, write_summary

THREAD_IDS: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def report_thread_ids(request):
    yield
    line = f"\ntest_concurrency: {THREAD_IDS['ids']} IDs from threads"
    write_summary(request, line)


def run_threads(
    generator: SnowflakeGenerator, count: int, work: Callable[[int], list[int]]
) -> list[list[int]]:
    barrier = threading.Barrier(count)
    results: list[list[int]] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    every = [value for ids in results for value in ids]
    assert len(set(every)) == len(every), "duplicate ID across threads"
    for ids in results:
        assert all(map(operator.lt, ids, ids[1:])), "a thread's IDs are not increasing"
    layout = generator.layout
    assert {(value >> layout.worker_shift) & layout.max_worker_id for value in every} == {
        generator.worker_id
    }
    THREAD_IDS["ids"] += len(every)
    return results


def test_threads_share_one_generator():
    generator = SnowflakeGenerator(LAYOUTS["twitter"], 7)
    results = run_threads(generator, 8, lambda index: [generator.next_id() for _ in range(50_000)])
    assert sum(map(len, results)) == 400_000


def test_threads_mix_next_id_and_next_ids():
    generator = SnowflakeGenerator(LAYOUTS["twitter"], 1023)

    def work(index: int) -> list[int]:
        rng = random.Random(index)
        ids: list[int] = []
        while len(ids) < 30_000:
            if rng.random() < 0.5:
                ids.append(generator.next_id())
            else:
                ids += generator.next_ids(rng.randint(0, 5000))
        return ids

    run_threads(generator, 4, work)


def in_child(work: Callable[[], dict]) -> tuple[int, dict]:
    """Run ``work`` in a forked child; return its exit code and the JSON it wrote."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            signal.alarm(20)
            os.write(write, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), json.loads(output or b"{}")


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")


@needs_fork
def test_fork_child_must_not_reuse_a_fixed_worker_id():
    clock = FakeClock()
    with mock.patch.object(generator_module, "time", SystemTime(clock, 0)):
        generator = SnowflakeGenerator(LAYOUTS["twitter"], 5, sleep=clock.sleep)
        before = generator.next_id()

        def work() -> dict:
            errors = []
            for call in (generator.next_id, lambda: generator.next_ids(2)):
                try:
                    return {"id": call()}
                except WorkerLeaseLost as exc:
                    errors.append(str(exc))
            return {"errors": errors}

        code, result = in_child(work)
        assert generator.next_id() == before + 1
    assert code == 0
    assert len(result.get("errors", [])) == 2, result
    assert f"process {os.getpid()}" in result["errors"][0]
    assert generator.worker_id == 5


@needs_fork
def test_fork_child_acquires_its_own_lease():
    layout = LAYOUTS["twitter"]
    source = CountingSource()
    generator = SnowflakeGenerator(layout, lease_source=source)
    parent_id = generator.next_id()
    inside = threading.Event()
    release = threading.Event()
    holder = threading.get_ident()

    def clock() -> int:
        if threading.get_ident() == holder:
            inside.set()
            release.wait(10)
        return system_clock()

    def hold_the_lock() -> None:
        nonlocal holder
        holder = threading.get_ident()
        generator.next_id()

    generator.use_clock(clock, lambda seconds: None)
    thread = threading.Thread(target=hold_the_lock)
    thread.start()
    assert inside.wait(10)

    def work() -> dict:
        value = generator.next_id()
        return {"id": value, "acquires": len(source.leases), "worker": generator.worker_id}

    try:
        code, result = in_child(work)
    finally:
        release.set()
        thread.join()
    assert code == 0, result
    assert result["acquires"] == 2 and result["worker"] == 2
    assert layout.decompose(result["id"]).worker_id == 2
    assert len(source.leases) == 1 and generator.worker_id == 1
    assert generator.next_id() > parent_id
