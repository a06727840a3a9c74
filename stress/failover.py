"""Failover under load: torture workers on a primary whose asynchronous standby is promoted.

A short scenario of its own (``--scenario failover``; PostgreSQL and MariaDB only) rather
than a kind of the random chaos: a failover replaces the whole database, so it is the run's
one big event. ``tests/ha_servers.Pair`` starts a real primary and a streaming standby on
private ports; the workers (``stress/torture_worker.py``, generating with their threads and
the fast path, under libfaketime at offset 0) reach the primary through ``Pair.routes()``:
libpq's multi-host connection on PostgreSQL, a router that the promotion switches on
MariaDB. Then:

1. every worker claims a slot and generates;
2. the standby is detached: from now on it misses every lease write of the primary;
3. the workers go on generating for a while (renewals, claims that the standby never sees);
4. the primary is killed and the standby promoted: the table there is the one of step 2;
5. as many new workers start at once and claim on the new primary (the slot rows they see
   are the old ones: a claim that trusted them would take live slots);
6. all generate until the old and new leases have both run a few renewals; every ID is then
   checked: 0 duplicates, and how long the new workers waited for their first ID.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from typing import Any

from .check import check_files
from .common import Database, log, work_dir
from .torture import LEASE_SECONDS, Chaos, TortureConfig, clean


@dataclasses.dataclass
class FailoverConfig:
    """Workers before and after the failover, threads each, seconds of generating before
    the standby is detached, while its writes are lost, and after the promotion."""

    processes: int = 4
    threads: int = 2
    rate: int = 40_000  # IDs per second for all workers
    before: float = 3.0
    lost: float = 2.0
    after: float = 4.0 * LEASE_SECONDS + 6.0

    @classmethod
    def quick(cls) -> FailoverConfig:
        # Long enough for workers started after the promotion to start under a loaded CI
        # machine (two rows, a Galera cluster) and wait out the hold: the bound on their wait
        # is passed() below, not this window.
        return cls(processes=3, rate=20_000, before=1.0, lost=1.0, after=3.0 * LEASE_SECONDS + 6)


def run_failover(
    vendor: str, config: FailoverConfig, *, keep: bool = False
) -> dict[str, Any] | None:
    """Run the failover on ``vendor`` (``None`` on SQLite, which has no standby)."""
    if vendor == "sqlite":
        return None
    from tests.ha_servers import Pair  # the failover tests' servers, shared

    started = time.monotonic()
    with work_dir(keep, prefix=f"snowflake-failover-{vendor}-") as run:
        for name in ("ids", "seams", "clock", "pids", "stats", "logs"):
            (run / name).mkdir()
        pair = Pair(vendor)
        try:
            pair.sql(pair.primary, "CREATE DATABASE stress")
            env = pair.env(*pair.routes(), database="stress")
            db = Database(
                vendor,
                "stress",
                env["SNOWFLAKE_TEST_DB_HOST"],
                env["SNOWFLAKE_TEST_DB_PORT"],
                env["SNOWFLAKE_TEST_DB_USER"],
                extra={key: value for key, value in env.items() if key.startswith("PG")},
            )
            db.migrate()
            pair.catch_up()
            torture = TortureConfig(
                processes=config.processes,
                threads=config.threads,
                # Chaos.spawn() gives each worker target_ids * 0.9 / processes / min_seconds.
                target_ids=int(config.rate / 0.9),
                min_seconds=1.0,
            )
            chaos = Chaos(db, run, torture)
            try:
                figures = drive(chaos, pair, config)
            finally:
                chaos.shutdown()
        finally:
            pair.close()
        result = check_files(list((run / "ids").iterdir()), run / "seams")
        errors: Counter[str] = Counter()
        unexpected: list[str] = []
        fast = singles = 0
        for path in (run / "stats").glob("*.json"):
            stats = json.loads(path.read_text())
            errors.update(stats["errors"])
            unexpected += stats["unexpected"]
            fast += stats.get("fast_path_ids", 0)
            singles += stats.get("single_ids", 0)
        logs = [p.read_text(errors="replace") for p in (run / "logs").iterdir()]
        tracebacks = [text for text in logs if "Traceback" in text]
        result.update(
            database=vendor,
            seconds=round(time.monotonic() - started, 1),
            processes=len(chaos.processes),
            **figures,
            expected_errors=dict(sorted(errors.items())),
            unexpected_errors=unexpected[:5],
            worker_tracebacks=tracebacks[:3],
            fast_path_share=round(fast / singles, 3) if singles else 0.0,
            run_dir=str(run) if keep else None,
        )
        waits = figures["new_claim_wait_seconds"]
        result["passed"] = (
            clean(result)
            and result["ids_after_failover"] > 0
            and len(waits) == config.processes
            and max(waits) <= LEASE_SECONDS + 10
        )
        return result


def drive(chaos: Chaos, pair: Any, config: FailoverConfig) -> dict[str, Any]:
    """Steps 1 to 6 of the module's docstring; the failover's figures."""
    for _ in range(config.processes):
        chaos.spawn()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # 1. every worker holds a slot and has issued
        chaos.discover()
        holders = [p for p in chaos.live() if chaos.stats(p.pid).get("written")]
        if len(holders) >= config.processes:
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("the workers did not start issuing on the primary")
    time.sleep(config.before)
    pair.detach()  # 2.
    log(f"failover {pair.vendor}: standby detached")
    time.sleep(config.lost)  # 3.
    before = chaos.written()
    pair.primary.kill()  # 4.
    failed_over = time.monotonic()
    pair.promote()
    log(f"failover {pair.vendor}: primary killed, standby promoted")
    first = len(chaos.spawned)
    for _ in range(config.processes):  # 5.
        chaos.spawn()
    new = {process.pid for process in chaos.spawned[first:]}
    waits: dict[int, float] = {}
    end = time.monotonic() + config.after
    while time.monotonic() < end:  # 6.
        chaos.discover()
        for pid in new - waits.keys():
            if chaos.stats(pid).get("written"):
                waits[pid] = round(time.monotonic() - failed_over, 1)
        time.sleep(0.1)
    return {
        "ids_before_failover": before,
        "ids_after_failover": chaos.written() - before,
        "new_claim_wait_seconds": sorted(waits.values()),
    }
