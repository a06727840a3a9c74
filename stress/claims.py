"""Many machines in simulation: hundreds of processes claim worker slots at the same instant.

``processes`` x ``threads`` claimers (``stress/claim_worker.py``; each thread has its own
generator, allocator and database connection, like a separate process) wait for one starting
gun and claim together on an empty ``WorkerNode`` table: the worst case, a whole fleet
starting at once. Every lease is held until all are in, so no two claimers may report the
same worker ID; then each issues IDs, and no ID may repeat. Claim latency is measured per
claimer, from the starting gun to its lease (the first connection included).

The full run (256 claimers; 32 on SQLite, which has one writer at a time) starts a private
database server with room for the connections: PostgreSQL with ``max_connections`` set in
its configuration, MariaDB with ``SET GLOBAL max_connections``.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from harness.processes import Lines, reap

from .common import ROOT, Database, log, percentile, private_database, work_dir


@dataclasses.dataclass
class ClaimsConfig:
    processes: int = 16
    threads: int = 16
    count: int = 100
    warm: bool = False

    @classmethod
    def quick(cls) -> ClaimsConfig:
        return cls(processes=4, threads=6, count=100)

    @classmethod
    def full(cls, vendor: str) -> ClaimsConfig:
        # SQLite has one writer at a time: 256 processes claiming on one file at one instant
        # wait out its lock for minutes and some fail with "database is locked" (a clear
        # WorkerLeaseLost, but no deployment to recommend). One machine's worth for it.
        return cls(processes=4, threads=8) if vendor == "sqlite" else cls()

    @property
    def claimers(self) -> int:
        return self.processes * self.threads


def simulate(db: Database, run: Path, config: ClaimsConfig) -> dict[str, Any]:
    """Run the claimers against ``db`` (migrated, empty worker table); return the figures."""
    start, go = run / "start", run / "go"
    processes = []
    for number in range(config.processes):
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "stress.claim_worker",
                    "--threads",
                    str(config.threads),
                    "--count",
                    str(config.count),
                    "--out",
                    str(run / f"ids{number}"),
                    "--start",
                    str(start),
                    "--go",
                    str(go),
                ],
                cwd=ROOT,
                env=db.env({"LEASE_SECONDS": 60, "PROCESS_LABEL": "claimer"}),
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        lines = [Lines(process) for process in processes]
        deadline = time.monotonic() + 120
        for output in lines:
            line = output.next(deadline)
            assert line.startswith("ready"), f"a claimer did not start: {line!r}"
        time.sleep(0.5)
        start.touch()
        claims: list[tuple[int, float, int]] = []
        failures: list[str] = []
        deadline = time.monotonic() + 120
        for output in lines:
            for _ in range(config.threads):
                words = output.next(deadline).split()
                if words and words[0] == "claimed":
                    claims.append((int(words[1]), float(words[2]), int(words[3])))
                else:
                    failures.append(" ".join(words))
        held_at_once = len(claims)
        active = int(
            db.sql("SELECT COUNT(*) FROM django_snowflake_workernode WHERE released_at IS NULL")[0][
                0
            ]
        )
        go.touch()
        for process in processes:
            process.wait(timeout=120)
    finally:
        reap(processes)
    ids = array("q")
    for number in range(config.processes):
        path = run / f"ids{number}"
        if path.exists():
            ids.frombytes(path.read_bytes())
    workers = [worker for worker, _, _ in claims]
    seconds = sorted(took for _, took, _ in claims)
    tries = sorted(float(n) for _, _, n in claims)
    released = int(
        db.sql("SELECT COUNT(*) FROM django_snowflake_workernode WHERE released_at IS NOT NULL")[0][
            0
        ]
    )
    result = {
        "database": db.vendor,
        "claimers": config.claimers,
        "processes_x_threads": f"{config.processes} x {config.threads}",
        "claimed": held_at_once,
        "failed": failures[:5],
        "distinct_worker_ids": len(set(workers)),
        "collisions": len(workers) - len(set(workers)),
        "highest_worker_id": max(workers, default=None),
        "active_rows_while_held": active,
        "claim_ms_p50": round(percentile(seconds, 0.5) * 1000, 1),
        "claim_ms_p99": round(percentile(seconds, 0.99) * 1000, 1),
        "claim_ms_max": round(seconds[-1] * 1000, 1) if seconds else None,
        "claim_ms_mean": round(statistics.fmean(seconds) * 1000, 1) if seconds else None,
        "attempts_p50_p99_max": [
            percentile(tries, 0.5),
            percentile(tries, 0.99),
            max(tries, default=0),
        ],
        "ids": len(ids),
        "duplicate_ids": len(ids) - len(set(ids)),
        "released_after_exit": released,
    }
    result["passed"] = (
        held_at_once == config.claimers
        and not failures
        and result["collisions"] == 0
        and active == config.claimers
        and len(ids) == config.claimers * config.count
        and result["duplicate_ids"] == 0
        and released == config.claimers
    )
    return result


# Three herds in a row on one table: a fleet's first start, its restart (every slot released,
# so every claim is a compare-and-set on a released row), and the restart again with the
# connections already open, which times the claim's queries alone.
HERDS = [
    ("cold", False, "empty table, new connections"),
    ("restart", False, "every slot released, new connections"),
    ("warm", True, "every slot released, connections open"),
]
SUMMARY = (
    "claimed",
    "collisions",
    "duplicate_ids",
    "claim_ms_p50",
    "claim_ms_p99",
    "claim_ms_max",
    "attempts_p50_p99_max",
)


def run_claims(vendor: str, config: ClaimsConfig) -> dict[str, Any]:
    """Start a private database of ``vendor`` sized for the claimers and simulate on it."""
    with work_dir(prefix="snowflake-claims-") as run:
        room = config.claimers + 100
        with private_database(vendor, run, max_connections=room) as db:
            if vendor == "mariadb":
                db.sql(f"SET GLOBAL max_connections = {room}")
            db.migrate()
            load_before = os.getloadavg()[0]
            herds = {}
            for name, warm, table in HERDS:
                log(f"claims {vendor}: {config.claimers} claimers, {name}: {table}")
                for path in (run / "start", run / "go"):
                    path.unlink(missing_ok=True)
                herds[name] = simulate(db, run, dataclasses.replace(config, warm=warm))
            first = herds["cold"]
            return {
                **first,
                "herds": {
                    name: {key: herd[key] for key in SUMMARY} for name, herd in herds.items()
                },
                "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
                "passed": all(herd["passed"] for herd in herds.values()),
            }
