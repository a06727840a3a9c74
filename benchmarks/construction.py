"""Section 2: model instances built per second, by primary key.

``Model(value=i, label=...)`` as a view or ``bulk_create`` caller builds them: for a
Snowflake or UUID key that includes generating the key (the field's default).
"""

from __future__ import annotations

import time
from typing import Any

from .benchapp.models import MODELS
from .common import log, rotated, summary

KEYS = ("bigauto", "snowflake", "uuid4", "uuid7")


def per_instance_seconds(model: Any, count: int, cpu: list[float] | None = None) -> float:
    started, started_cpu = time.perf_counter(), time.thread_time()
    for i in range(count):
        model(value=i, label="benchmark")
    if cpu is not None:
        cpu.append((time.thread_time() - started_cpu) / count)
    return (time.perf_counter() - started) / count


def run(rounds: int, count: int) -> dict[str, Any]:
    seconds: dict[str, list[float]] = {key: [] for key in KEYS}
    cpu: dict[str, list[float]] = {key: [] for key in KEYS}
    for key in KEYS:  # warm up: first instances fill Django's caches
        per_instance_seconds(MODELS[key], 1000)
    for round_number in range(rounds):
        for key in rotated(KEYS, round_number):
            seconds[key].append(per_instance_seconds(MODELS[key], count, cpu[key]))
        log(
            f"construction round {round_number + 1}/{rounds}: "
            + ", ".join(f"{key} {seconds[key][-1] * 1e6:.2f} µs" for key in KEYS)
        )
    extra = {
        key: [(s - b) * 1e6 for s, b in zip(seconds[key], seconds["bigauto"], strict=True)]
        for key in KEYS
        if key != "bigauto"
    }
    return {
        "count": count,
        "instances_per_second": {
            key: summary([1 / s for s in values]) for key, values in seconds.items()
        },
        "microseconds": {
            key: summary([s * 1e6 for s in values]) for key, values in seconds.items()
        },
        "extra_microseconds_vs_bigauto": {key: summary(values) for key, values in extra.items()},
        # The same difference in CPU time, which moves less with the machine's load.
        "extra_cpu_microseconds_vs_bigauto": {
            key: summary([(s - b) * 1e6 for s, b in zip(cpu[key], cpu["bigauto"], strict=True)])
            for key in KEYS
            if key != "bigauto"
        },
    }
