"""Section 4: how long a fresh process takes to claim its worker slot, alone and in a herd.

Every claimant is a fresh interpreter (:mod:`benchmarks.claim_process`), set up before the
starting gun (a barrier file) so that the herd claims at the same moment, as a fleet of app
servers restarting together would. Each reports its own claim time (the database round
trips of the claim, not the interpreter's start). The WorkerNode table is emptied before
every run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django_snowflake.models import WorkerNode
from harness.processes import expect_line, reap

from .common import ROOT, log, rotated, summary


def herd(alias: str, size: int) -> dict[str, Any]:
    """Start ``size`` claimants on ``alias``, fire them together, return their claim times."""
    WorkerNode.objects.using(alias).all().delete()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "SNOWFLAKE_BENCH_WORKERS": alias,
    }
    with tempfile.TemporaryDirectory() as directory:
        start, go = Path(directory) / "start", Path(directory) / "go"
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.claim_process", str(start), str(go)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(size)
        ]
        failed = 0
        try:
            for process in processes:
                expect_line(process, "ready")
            started = time.perf_counter()
            start.touch()
            claims = []
            for process in processes:
                try:
                    claims.append(expect_line(process, "claimed")[1:])
                except RuntimeError as exc:  # e.g. the server's connection limit: count it
                    log(str(exc))
                    failed += 1
            wall = time.perf_counter() - started
            go.touch()
            for process in processes:
                process.wait(timeout=120)
        finally:
            reap(processes)
    workers = {int(worker) for worker, _ in claims}
    if len(workers) != len(claims):
        raise RuntimeError(f"{len(claims)} claimants got only {len(workers)} distinct worker IDs")
    seconds = sorted(float(took) for _, took in claims)
    return {
        "median_seconds": statistics.median(seconds),
        "max_seconds": seconds[-1],
        "wall_seconds": wall,
        "failed": failed,
    }


def run(aliases: list[str], runs: int, herds: tuple[int, ...]) -> dict[str, Any]:
    sizes = (1, *herds)
    raw: dict[str, dict[int, list[dict[str, Any]]]] = {
        alias: {size: [] for size in sizes} for alias in aliases
    }
    jobs = [(alias, size) for alias in aliases for size in sizes]
    for run_number in range(runs):
        for alias, size in rotated(jobs, run_number):
            raw[alias][size].append(herd(alias, size))
        log(
            f"claims run {run_number + 1}/{runs}: "
            + ", ".join(
                f"{alias} first {raw[alias][1][-1]['median_seconds'] * 1000:.1f} ms, "
                f"herd of {herds[-1]} median "
                f"{raw[alias][herds[-1]][-1]['median_seconds'] * 1000:.1f} ms"
                for alias in aliases
            )
        )
    out: dict[str, Any] = {}
    for alias in aliases:
        WorkerNode.objects.using(alias).all().delete()
        out[alias] = {
            "first_claim_ms": summary([r["median_seconds"] * 1000 for r in raw[alias][1]]),
            **{
                f"herd_{size}": {
                    "median_claim_ms": summary(
                        [r["median_seconds"] * 1000 for r in raw[alias][size]]
                    ),
                    "slowest_claim_ms": summary(
                        [r["max_seconds"] * 1000 for r in raw[alias][size]]
                    ),
                    "all_claimed_ms": summary([r["wall_seconds"] * 1000 for r in raw[alias][size]]),
                    "failed_claims": sum(r["failed"] for r in raw[alias][size]),
                }
                for size in herds
            },
        }
    return {"runs": runs, "herds": list(herds), "databases": out}
