"""Section 1: IDs per second, single-threaded and with threads contending.

Each variant runs the same loop (``for _ in range(n): function()``) so loop overhead is
shared; the ratios are taken per round (paired), then summarised over the rounds.
``generate()`` and ``generate_many()`` run twice in each round, with the Prometheus metrics
off and on (``django_snowflake.metrics.install()``: its receivers connected), side by side.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import django_snowflake
from django_snowflake import generate, generate_many

from .baselines import NaiveSnowflake, uuid7
from .common import log, rotated, summary

THREADS = (1, 2, 4)
BATCH = 10_000


def calls_per_second(
    function: Callable[[], object], threads: int, total: int, cpu: list[float] | None = None
) -> float:
    """IDs per second of ``threads`` threads sharing ``total`` calls of ``function``.

    Appends to ``cpu`` the CPU time per call the threads used (a check that does not move
    with the machine's load, where a rate does).
    """
    per_thread = total // threads
    barrier = threading.Barrier(threads + 1)
    used: list[float] = []

    def work() -> None:
        barrier.wait()
        started = time.thread_time()
        for _ in range(per_thread):
            function()
        used.append(time.thread_time() - started)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append(sum(used) / (per_thread * threads))
    return per_thread * threads / elapsed


def batch_rate(batches: int) -> float:
    started = time.perf_counter()
    for _ in range(batches):
        generate_many(BATCH)
    return batches * BATCH / (time.perf_counter() - started)


@contextlib.contextmanager
def metrics_on() -> Iterator[None]:
    """The Prometheus metrics installed for the block (the ``prometheus`` extra)."""
    from django_snowflake import metrics

    metrics.install()
    try:
        yield
    finally:
        metrics.uninstall()


def check_correctness(threads: int = 4, per_thread: int = 50_000) -> None:
    """Contending threads get unique IDs, increasing in each thread (untimed)."""
    results: list[list[int]] = []

    def work() -> None:
        ids = [generate() for _ in range(per_thread)]
        ids += generate_many(BATCH)
        results.append(ids)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    every = [i for ids in results for i in ids]
    assert len(set(every)) == len(every), "duplicate IDs"
    assert all(ids == sorted(ids) for ids in results), "IDs not increasing within a thread"


def queries_per_id(count: int) -> dict[str, Any]:
    """Database queries (from any thread) while ``count`` IDs are generated after the claim."""
    from django.db.backends.utils import CursorWrapper

    executed = 0
    original = CursorWrapper._execute_with_wrappers

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal executed
        executed += 1
        return original(self, *args, **kwargs)

    CursorWrapper._execute_with_wrappers = counting  # type: ignore[method-assign]
    try:
        for _ in range(count):
            generate()
        generate_many(count)
    finally:
        CursorWrapper._execute_with_wrappers = original  # type: ignore[method-assign]
    return {"ids": 2 * count, "queries": executed, "queries_per_id": executed / (2 * count)}


def run(rounds: int, calls: int, batches: int) -> dict[str, Any]:
    generator = django_snowflake.get_generator()
    claim_started = time.perf_counter()
    generator.ensure_lease()
    claim_seconds = time.perf_counter() - claim_started
    layout = generator.layout
    limit = layout.ids_per_second  # the bit-space limit of one worker: 4,096,000 for twitter
    naive = NaiveSnowflake()
    variants: dict[str, Callable[[], object]] = {
        "naive": naive.next_id,
        "generate": generate,
        "uuid4": uuid.uuid4,
        "uuid7": uuid7,
    }
    check_correctness()
    rates: dict[str, list[float]] = {}
    cpu_per_call: dict[str, list[float]] = {}
    many: list[float] = []
    many_metrics: list[float] = []
    jobs = [(name, threads) for threads in THREADS for name in [*variants, "generate+metrics"]]
    jobs += [("many", 0), ("many+metrics", 0)]
    for round_number in range(rounds):
        for name, threads in rotated(jobs, round_number):
            with metrics_on() if name.endswith("+metrics") else contextlib.nullcontext():
                if name == "many":
                    many.append(batch_rate(batches))
                elif name == "many+metrics":
                    many_metrics.append(batch_rate(batches))
                else:
                    cpu = cpu_per_call.setdefault(f"{name}@{threads}", [])
                    function = variants[name.removesuffix("+metrics")]
                    rate = calls_per_second(function, threads, calls, cpu)
                    rates.setdefault(f"{name}@{threads}", []).append(rate)
        log(
            f"generation round {round_number + 1}/{rounds}: generate "
            f"{rates['generate@1'][-1]:,.0f}/s, naive {rates['naive@1'][-1]:,.0f}/s, "
            f"2 threads {rates['generate@2'][-1]:,.0f} vs {rates['naive@2'][-1]:,.0f}/s, "
            f"generate_many {many[-1]:,.0f}/s"
        )
    ratios = {
        f"generate/naive@{threads}": [
            g / n
            for g, n in zip(rates[f"generate@{threads}"], rates[f"naive@{threads}"], strict=True)
        ]
        for threads in THREADS
    }
    ratios.update(
        {
            f"generate/{other}@1": [
                g / o for g, o in zip(rates["generate@1"], rates[f"{other}@1"], strict=True)
            ]
            for other in ("uuid4", "uuid7")
        }
    )
    ratios["generate_many/limit"] = [rate / limit for rate in many]
    # The metrics on against off, and against the layout's limit.
    ratios["generate_many+metrics/limit"] = [rate / limit for rate in many_metrics]
    for threads in THREADS:
        on, off = rates[f"generate+metrics@{threads}"], rates[f"generate@{threads}"]
        ratios[f"generate+metrics/generate@{threads}"] = [
            a / b for a, b in zip(on, off, strict=True)
        ]
        ratios[f"generate+metrics/limit@{threads}"] = [rate / limit for rate in on]
        ratios[f"generate/limit@{threads}"] = [rate / limit for rate in off]
    ratios["cpu: naive/generate@1"] = [
        n / g for n, g in zip(cpu_per_call["naive@1"], cpu_per_call["generate@1"], strict=True)
    ]
    return {
        "calls": calls,
        "batch": BATCH,
        "batches": batches,
        "layout_limit_ids_per_second": limit,
        "first_claim_seconds": claim_seconds,
        "rates": {key: summary(values) for key, values in rates.items()},
        "cpu_ns_per_call": {
            key: summary([v * 1e9 for v in values]) for key, values in cpu_per_call.items()
        },
        "generate_many": summary(many),
        "generate_many+metrics": summary(many_metrics),
        "ratios": {key: summary(values) for key, values in ratios.items()},
        "queries_after_claim": queries_per_id(100_000),
    }
