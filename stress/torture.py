"""The torture run: processes x threads generate IDs while a chaos driver breaks things.

The driver keeps at least ``processes`` workers (``stress/torture_worker.py``) running on a
database of its own (a SQLite file, or a private PostgreSQL/MariaDB server it may kill), and
at random intervals injects one fault of these kinds:

``fork``            SIGUSR1: a worker forks; the child generates too, on a slot of its own.
``sigkill``         SIGKILL a lease holder (nothing released) and start a replacement.
``clock_back``      step one worker's clock back by 2 ms ... 10 s; NTP puts it right 0.5-4 s later.
``clock_forward``   step one worker's clock forward 1 h; 1-3 s later it is stepped back (the
                    worker is then behind its own IDs and raises), and 2-4 s after that the
                    stuck worker is SIGKILLed and replaced.
``lease_expiry``    SIGSTOP a worker for 1.5-3 leases (a paused VM): its lease expires and
                    its slot may be taken; then SIGCONT.
``db_restart``      PostgreSQL/MariaDB: kill the private server (immediate shutdown / SIGKILL)
                    and start it 0.3-5 s later. SQLite has no server to restart: the
                    database is a file each process opens itself. Its outage is ``db_lock``:
                    another connection holds an exclusive lock for 0.5-5 s, so every claim
                    and renewal waits or fails.

``reset``           SIGUSR2: the worker calls ``runtime.reset()`` while its threads generate.
``layout_change``   start a process of another bit layout while workers hold slots: it must
                    get ``LayoutMismatch`` and no ID.

The clocks are stepped through libfaketime (``torture_worker.faketime_env``), so the
generators keep the real system clock and their lock-free fast path. Failover is a
scenario of its own (``stress/failover.py``).

Every worker appends every ID it got to a file per thread. At the end the files are checked:
no ID twice, and each thread's IDs strictly increasing under the ``raise``, ``wait`` and
``borrow`` policies (``ring`` and ``clock_sequence`` may go back inside their bound).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import json
import math
import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django_snowflake.generator import POLICIES

from .check import check_files
from .common import ROOT, Database, log, private_database, work_dir
from .torture_worker import faketime_env, write_offset

LEASE_SECONDS = 3
# The workers take the generator's rollback policies in turn, each with this MAX_ROLLBACK_MS
# (a policy added to the generator without a bound here stops the run at its first spawn).
MAX_ROLLBACK_MS = {"raise": 0, "wait": 5, "borrow": 20, "clock_sequence": 5, "ring": 20}
# One layout for all: clock-sequence bits for that policy, and only 32 worker slots, so that
# forks, kills and stuck slots can exhaust them (NoWorkerAvailable).
LAYOUT = {"CLOCK_SEQUENCE_BITS": 2, "WORKER_BITS": 5, "SEQUENCE_BITS": 15}
# The layout of a process from a deploy that changed bits: refused while others hold slots.
OTHER_LAYOUT = {"CLOCK_SEQUENCE_BITS": 2, "WORKER_BITS": 6, "SEQUENCE_BITS": 14}
HOUR_MS = 3_600_000

WEIGHTS = {
    "fork": 1.0,
    "sigkill": 2.0,
    "clock_back": 3.0,
    "clock_forward": 0.4,
    "lease_expiry": 1.5,
    "db_restart": 0.8,
    "reset": 1.0,
    "layout_change": 0.3,
}


@dataclasses.dataclass
class TortureConfig:
    """Workers at the start and at most (replacements included), faults' spacing in seconds,
    and how long the run lasts: until ``target_ids`` and ``min_seconds``, or ``max_seconds``."""

    processes: int = 16
    threads: int = 3
    max_processes: int = 22
    fault_every: tuple[float, float] = (0.3, 1.5)
    target_ids: int = 10_000_000
    min_seconds: float = 150.0
    max_seconds: float = 900.0
    seed: int | None = None

    @classmethod
    def quick(cls) -> TortureConfig:
        return cls(
            processes=6,
            threads=2,
            target_ids=120_000,
            min_seconds=20,
            max_seconds=120,
            max_processes=9,
            fault_every=(0.2, 0.8),
        )


class Process:
    """A worker found in ``pids/``; signalled through a pidfd, so never a reused pid."""

    def __init__(self, pid: int, policy: str, clock: str) -> None:
        self.pid = pid
        self.policy = policy
        self.clock = clock  # the name of its libfaketime file, shared with its forks
        self.fd = os.pidfd_open(pid)
        self.stopped = False

    def alive(self) -> bool:
        if self.fd < 0:
            return False
        readable, _, _ = select.select([self.fd], [], [], 0)
        if readable:  # the process has exited
            os.close(self.fd)
            self.fd = -1
        return self.fd >= 0

    def signal(self, number: int) -> bool:
        if not self.alive():
            return False
        try:
            signal.pidfd_send_signal(self.fd, number)
        except ProcessLookupError:
            return False
        return True


class Chaos:
    def __init__(self, db: Database, run: Path, config: TortureConfig) -> None:
        self.db = db
        self.run = run
        self.config = config
        self.rng = random.Random(config.seed)
        self.faults: Counter[str] = Counter()
        self.untried = self.rng.sample(list(WEIGHTS), len(WEIGHTS))
        self.processes: dict[int, Process] = {}
        self.spawned: list[subprocess.Popen[bytes]] = []
        self.probes: list[subprocess.Popen[bytes]] = []
        self.spawned_pids: set[int] = set()
        self.offsets: dict[str, int] = {}  # clock file -> the offset it sets (ms)
        self.spawn_counter = itertools.count()
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self.event_counter = itertools.count()
        self.db_down = False
        self.started = time.monotonic()

    # Processes.

    def spawn(self) -> None:
        number = next(self.spawn_counter)
        policy = POLICIES[number % len(POLICIES)]
        snowflake = {
            **LAYOUT,
            "LEASE_SECONDS": LEASE_SECONDS,
            "CLOCK_ROLLBACK": policy,
            "MAX_ROLLBACK_MS": MAX_ROLLBACK_MS[policy],
            "PROCESS_LABEL": f"torture-{policy}",
        }
        rate = self.config.target_ids * 0.9 / self.config.processes / self.config.min_seconds
        clock = self.run / "clock" / str(number)
        write_offset(clock, 0)
        self.offsets[clock.name] = 0
        with open(self.run / "logs" / f"{number}.err", "wb") as err:
            self.spawned.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "stress.torture_worker",
                        str(self.run),
                        "--threads",
                        str(self.config.threads),
                        "--rate",
                        f"{rate:.0f}",
                        "--policy",
                        policy,
                    ],
                    cwd=ROOT,
                    env={**self.db.env(snowflake), **faketime_env(clock)},
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
        self.spawned_pids.add(self.spawned[-1].pid)

    def discover(self) -> None:
        for path in (self.run / "pids").iterdir():
            pid = int(path.name)
            if pid not in self.processes:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    about = json.loads(path.read_text())
                    self.processes[pid] = Process(pid, about["policy"], about["clock"])
        self.spawned = [p for p in self.spawned if p.poll() is None]

    def live(self) -> list[Process]:
        return [p for p in self.processes.values() if p.alive()]

    def stats(self, pid: int) -> dict[str, Any]:
        try:
            return dict(json.loads((self.run / "stats" / f"{pid}.json").read_text()))
        except (OSError, ValueError):
            return {}

    def starting(self) -> int:
        """Spawned processes that have not yet announced themselves."""
        return sum(1 for p in self.spawned if p.pid not in self.processes)

    # Timed events.

    def later(self, seconds: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (time.monotonic() + seconds, next(self.event_counter), action))

    def run_due_events(self) -> None:
        while self.events and self.events[0][0] <= time.monotonic():
            _, _, action = heapq.heappop(self.events)
            action()

    # Faults.

    def inject(self) -> None:
        # Every kind first, in a random order, so that even a short run meets each of them;
        # a kind that found nothing to act on (no lease holder yet, too many processes) waits
        # for its turn again. Then kinds are drawn by weight.
        kinds = list(WEIGHTS)
        if self.untried:
            kind = self.untried.pop(0)
        else:
            kind = self.rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]
        before = self.faults.total()
        if getattr(self, f"fault_{kind}")():
            self.faults[kind] += 1
        if self.faults.total() == before and kind not in self.untried and not self.faults[kind]:
            self.untried.append(kind)

    def _pick(self, condition: Callable[[Process], bool] = lambda p: True) -> Process | None:
        candidates = [p for p in self.live() if not p.stopped and condition(p)]
        return self.rng.choice(candidates) if candidates else None

    def fault_fork(self) -> bool:
        if len(self.live()) + self.starting() >= self.config.max_processes:
            return False
        process = self._pick()
        return process is not None and process.signal(signal.SIGUSR1)

    def fault_sigkill(self, process: Process | None = None) -> bool:
        process = process or self._pick(lambda p: self.stats(p.pid).get("worker_id") is not None)
        if process is None or not process.signal(signal.SIGKILL):
            return False
        self.spawn()  # the replacement
        self.faults["replacement"] += 1
        return True

    def _set_offset(self, process: Process, offset: int) -> None:
        self.offsets[process.clock] = offset
        write_offset(self.run / "clock" / process.clock, offset)

    def _unstepped(self, process: Process) -> bool:
        return self.offsets.get(process.clock, 0) == 0

    def fault_clock_back(self) -> bool:
        process = self._pick(self._unstepped)
        if process is None:
            return False
        step = int(math.exp(self.rng.uniform(math.log(2), math.log(10_000))))
        self._set_offset(process, -step)
        self.later(self.rng.uniform(0.5, 4), lambda: self._set_offset(process, 0))
        return True

    def fault_clock_forward(self) -> bool:
        process = self._pick(self._unstepped)
        if process is None:
            return False
        self._set_offset(process, HOUR_MS)
        back = self.rng.uniform(1, 3)
        self.later(back, lambda: self._set_offset(process, 0))

        def kill_stuck() -> None:
            self._restart_stuck(process)

        self.later(back + self.rng.uniform(2, 4), kill_stuck)
        return True

    def _restart_stuck(self, process: Process) -> None:
        if not process.stopped and process.signal(signal.SIGKILL):
            self.faults["sigkill"] += 1
            self.faults["replacement"] += 1
            self.spawn()

    def fault_lease_expiry(self) -> bool:
        process = self._pick()
        if process is None or not process.signal(signal.SIGSTOP):
            return False
        process.stopped = True

        def resume() -> None:
            process.signal(signal.SIGCONT)
            process.stopped = False

        self.later(self.rng.uniform(1.5, 3) * LEASE_SECONDS, resume)
        return True

    def fault_db_restart(self) -> bool:
        if self.db_down:
            return False
        self.db_down = True
        down_for = self.rng.uniform(0.3, 5)
        if self.db.server is None:
            self.faults["db_lock"] += 1
            threading.Thread(target=self._lock_sqlite, args=(down_for,), daemon=True).start()
            return False  # counted as db_lock
        self.db.server.kill()
        self.later(down_for, self._start_server)
        return True

    def _start_server(self) -> None:
        assert self.db.server is not None
        self.db.server.start()
        self.db_down = False

    def _lock_sqlite(self, seconds: float) -> None:
        with contextlib.closing(sqlite3.connect(self.db.name, timeout=30)) as connection:
            connection.isolation_level = None
            connection.execute("BEGIN EXCLUSIVE")
            time.sleep(seconds)
            connection.execute("ROLLBACK")
        self.db_down = False

    def fault_reset(self) -> bool:
        """``runtime.reset()`` in a lease holder while its threads generate (SIGUSR2)."""
        process = self._pick(lambda p: self.stats(p.pid).get("worker_id") is not None)
        return process is not None and process.signal(signal.SIGUSR2)

    def fault_layout_change(self) -> bool:
        """Start a process with another layout while the workers hold slots: it must be
        refused (``LayoutMismatch``) and issue nothing (``probe_layout``)."""
        if not any(self.stats(p.pid).get("worker_id") is not None for p in self.live()):
            return False
        snowflake = {**OTHER_LAYOUT, "LEASE_SECONDS": LEASE_SECONDS, "PROCESS_LABEL": "layout"}
        command = [sys.executable, "-m", "stress.torture_worker", str(self.run), "--probe-layout"]
        with open(self.run / "logs" / f"layout-{len(self.probes)}.err", "wb") as err:
            self.probes.append(
                subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env=self.db.env(snowflake),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
        return True

    # The run.

    def written(self) -> int:
        """IDs written so far, as the workers last reported them (the files are memory maps
        grown ahead of their writes; the check at the end counts the IDs themselves)."""
        return sum(
            self.stats(int(p.stem)).get("written", 0) for p in (self.run / "stats").glob("*.json")
        )

    def drive(self) -> float:
        config = self.config
        for _ in range(config.processes):
            self.spawn()
        next_fault = time.monotonic() + 3  # let the first claims happen
        next_log = time.monotonic()
        while True:
            now = time.monotonic()
            elapsed = now - self.started
            self.discover()
            self.run_due_events()
            if len(self.live()) + self.starting() < config.processes:
                self.spawn()
            written = self.written()
            if written >= config.target_ids and elapsed >= config.min_seconds:
                break
            if elapsed > config.max_seconds:
                log(f"torture: time is up with {written} of {config.target_ids} IDs")
                break
            if now >= next_fault:
                self.inject()
                next_fault = now + self.rng.uniform(*config.fault_every)
            if now >= next_log:
                log(
                    f"torture {self.db.vendor}: {elapsed:.0f} s, {written:,} IDs, "
                    f"{len(self.live())} processes, faults {dict(self.faults)}"
                )
                next_log = now + 10
            time.sleep(0.05)
        return time.monotonic() - self.started

    def shutdown(self) -> None:
        """Heal everything, then stop every worker cleanly (SIGKILL only the hung)."""
        while self.events:  # resume, resync and restart what is pending, but kill no more
            _, _, action = heapq.heappop(self.events)
            if getattr(action, "__name__", "") != "kill_stuck":
                action()
        while self.db_down and self.db.server is None:
            time.sleep(0.1)
        self.discover()
        for process in self.live():
            process.signal(signal.SIGCONT)
            process.signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        # A worker spawned by a restart just above may not have announced itself yet: it is
        # waited for and stopped too, or the wait below would never return.
        while (self.live() or self.starting()) and time.monotonic() < deadline:
            time.sleep(0.1)
            self.discover()  # forks and late starters answered late
            for process in self.live():
                process.signal(signal.SIGTERM)
        for process in self.live():
            log(f"torture: worker {process.pid} did not stop; SIGKILL")
            process.signal(signal.SIGKILL)
        for spawned in self.spawned:
            if spawned.poll() is None:
                log(f"torture: worker {spawned.pid} never started; SIGKILL")
                spawned.kill()
        for spawned in [*self.spawned, *self.probes]:
            spawned.wait()
        # libfaketime's per-process shared memory, left behind by every killed worker.
        for pid in {*self.processes, *self.spawned_pids}:
            for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
                with contextlib.suppress(OSError):
                    os.unlink(f"/dev/shm/{name}")


def run_torture(vendor: str, config: TortureConfig, *, keep: bool = False) -> dict[str, Any]:
    """Run the torture on ``vendor``'s database and check every ID; return the figures."""
    with work_dir(keep, prefix=f"snowflake-torture-{vendor}-") as run:
        for name in ("ids", "seams", "clock", "pids", "stats", "logs"):
            (run / name).mkdir()
        with private_database(vendor, run) as db:
            db.migrate()
            chaos = Chaos(db, run, config)
            try:
                duration = chaos.drive()
            finally:
                chaos.shutdown()
            workers = db.sql(
                "SELECT COUNT(*), COUNT(DISTINCT worker_id) FROM django_snowflake_workernode"
            )
        check_started = time.monotonic()
        result = check_files(list((run / "ids").iterdir()), run / "seams")
        errors: Counter[str] = Counter()
        warnings: Counter[str] = Counter()
        paths: Counter[str] = Counter()
        unexpected: list[str] = []
        probes = refused = probe_ids = 0
        for path in (run / "stats").glob("*.json"):
            stats = json.loads(path.read_text())
            warnings.update(stats["warnings"])
            unexpected += stats["unexpected"]
            if stats.get("probe"):
                probes += 1
                refused += bool(stats["errors"].get("LayoutMismatch"))
                probe_ids += stats["written"]
                continue
            errors.update(stats["errors"])
            for key in ("single_ids", "batched_ids", "fast_path_ids", "fast_path_ids_stepped"):
                paths[key] += stats.get(key, 0)
            paths["resets"] += stats.get("resets", 0)
            paths["max_step_seen_ms"] = max(
                paths["max_step_seen_ms"], stats.get("max_step_seen_ms", 0)
            )
        singles = paths["single_ids"]
        logs = [p.read_text(errors="replace") for p in (run / "logs").iterdir()]
        tracebacks = [text for text in logs if "Traceback" in text]
        result.update(
            database=vendor,
            seconds=round(duration, 1),
            check_seconds=round(time.monotonic() - check_started, 1),
            processes=len(chaos.processes),
            threads_per_process=config.threads,
            faults=dict(sorted(chaos.faults.items())),
            expected_errors=dict(sorted(errors.items())),
            logged_warnings=dict(sorted(warnings.items())),
            unexpected_errors=unexpected[:5],
            worker_tracebacks=tracebacks[:3],
            worker_rows=int(workers[0][0]),
            fast_path_ids=paths["fast_path_ids"],
            slow_path_ids=singles - paths["fast_path_ids"],
            batch_ids=paths["batched_ids"],
            fast_path_share=round(paths["fast_path_ids"] / singles, 3) if singles else 0.0,
            fast_path_ids_while_stepped=paths["fast_path_ids_stepped"],
            max_step_seen_ms=paths["max_step_seen_ms"],
            resets_done=paths["resets"],
            layout_probes=probes,
            layout_probes_refused=refused,
            layout_probe_ids=probe_ids,
            target_ids=config.target_ids,
            run_dir=str(run) if keep else None,
        )
        result["passed"] = (
            clean(result)
            and result["ids"] >= config.target_ids
            and probe_ids == 0
            and refused == probes
        )
        return result


def clean(result: dict[str, Any]) -> bool:
    """No duplicate, no order broken where promised, no negative ID, and no worker that
    met an unexpected exception or printed a traceback."""
    return (
        result["duplicates"] == 0
        and not result["out_of_order"]
        and not result["unexpected_errors"]
        and not result["worker_tracebacks"]
        and result["negative"] == 0
    )
