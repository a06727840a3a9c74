"""One process of the torture run: ``python -m stress.torture_worker RUN_DIR --threads N ...``.

Its threads generate IDs with the process-local generator (the database allocator, the
``SNOWFLAKE`` of ``SNOWFLAKE_TEST_SETTINGS``) and store each one, as it is issued, into one
file per thread (:class:`IdLog`), ``RUN_DIR/ids/<pid>-<thread>-<policy>.bin``, as native
int64s in the order that thread got them, followed by unwritten zeros. The chaos driver
talks to it through files and signals:

* ``RUN_DIR/clock/<n>``: the offset libfaketime adds to the process's real-time clock
  (:func:`faketime_env`); the driver rewrites it to step the clock back or forward, and
  the next reading of the clock sees it. The generator keeps the system clock, so its
  lock-free fast path stays armed: the worker counts the IDs that took it;
* ``SIGUSR1``: fork, the child being a full worker of its own (sharing the parent's clock
  file, as processes of one machine share its clock); ``SIGUSR2``: ``runtime.reset()``
  while the threads generate; ``SIGTERM``: exit cleanly (releasing the worker slot);
* ``RUN_DIR/pids/<pid>``: written at start, so the driver knows forked children too;
* ``RUN_DIR/stats/<pid>.json``: rewritten twice a second with the IDs written (those that
  took the fast path among them), the expected errors by kind, and the worker ID held.

``--probe-layout`` runs :func:`probe_layout` instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import mmap
import os
import random
import select
import signal
import sys
import threading
import time
import traceback
from array import array
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def faketime_env(clock_file: Path) -> dict[str, str]:
    """The environment that puts a worker's clock under libfaketime, stepped through
    ``clock_file`` (:func:`write_offset`).

    libfaketime steps what the process reads from the system's real-time clock, so the
    generator keeps ``system_clock`` and its lock-free fast path stays armed under faults (an
    injected clock would close it). Not the MT build: its mutex, held by a thread reading
    the clock when another forks, stays locked in the child, whose first reading then hangs
    (1 fork in 30 here); the worker's threads read the clock holding the GIL, one at a time.
    The file re-read
    at every reading (``FAKETIME_NO_CACHE``: a step takes effect at once, about 13 us per
    reading); the monotonic clock left real, or every ``Event.wait`` of the threads would
    take a wall-clock deadline for a monotonic one and never end.
    """
    if not Path(LIBFAKETIME).exists():
        raise RuntimeError(
            f"The torture steps clocks with libfaketime, and {LIBFAKETIME} is missing: "
            "apt-get install faketime"
        )
    return {
        "LD_PRELOAD": LIBFAKETIME,
        "FAKETIME_TIMESTAMP_FILE": str(clock_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def write_offset(path: Path, offset_ms: int) -> None:
    """Step the clock of the processes reading ``path`` to the real clock plus ``offset_ms``.

    libfaketime reads the file as a whole at every reading: written aside and renamed, so it
    never sees half of it."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(f"{offset_ms / 1000:+.3f}\n")
    os.replace(temporary, path)


def read_offset(path: Path) -> int:
    """The offset in ms that ``path`` sets (0 for a file that is not there)."""
    try:
        return round(float(path.read_text().strip() or 0) * 1000)
    except (OSError, ValueError):
        return 0


def _sleep(seconds: float) -> None:
    # libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC hands the kernel a negative
    # deadline for Python 3.11's clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) (EINVAL:
    # wolfcw/libfaketime#426); select() takes a relative timeout, which it passes on as is.
    select.select([], [], [], max(seconds, 0.0))


if "FAKETIME_TIMESTAMP_FILE" in os.environ:
    time.sleep = _sleep  # before Django and the package read it


class IdLog:
    """One thread's IDs, stored into a shared memory map of its file as each one is issued.

    The page cache owns a shared mapping's pages, so the IDs a process got before a SIGKILL
    reach the file although the process never wrote them out: a buffer flushed now and then
    would lose exactly the IDs of a killed lease holder, those most likely to collide with
    its replacement's. The file grows sparsely by doubling; its unwritten tail is zeros,
    which ``stress.check`` drops (no ID is 0 after the epoch's first millisecond).
    """

    def __init__(self, path: Path, capacity: int = 1 << 16) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.count = 0
        self.capacity = 0
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        self._release()
        os.ftruncate(self.fd, capacity * 8)
        self._map = mmap.mmap(self.fd, capacity * 8)
        self._view = memoryview(self._map).cast("q")
        self.capacity = capacity

    def append(self, value: int) -> None:
        if self.count == self.capacity:
            self._grow(self.capacity * 2)
        self._view[self.count] = value  # type: ignore[index]
        self.count += 1

    def extend(self, values: list[int]) -> None:
        while self.count + len(values) > self.capacity:
            self._grow(self.capacity * 2)
        self._view[self.count : self.count + len(values)] = array("q", values)  # type: ignore[index]
        self.count += len(values)

    def _release(self) -> None:
        if self._view is not None:
            self._view.release()
        if self._map is not None:
            self._map.close()

    def close(self) -> None:
        self._release()
        os.close(self.fd)


class Worker:
    def __init__(self, args: argparse.Namespace, base_ns: int | None = None) -> None:
        self.args = args
        self.run = Path(args.run)
        self.pid = os.getpid()
        self.stop = threading.Event()
        self.stopping = False  # SIGTERM came (see _stop)
        self.fork_requested = False
        self.reset_requested = False
        self.errors: dict[str, int] = {}
        self.unexpected: list[str] = []
        self.logs: list[IdLog | None] = [None] * args.threads
        self.count_lock = threading.Lock()
        self.clock_file = Path(os.environ.get("FAKETIME_TIMESTAMP_FILE", os.devnull))
        # The real clock's distance from the monotonic one at offset 0, so that the worker
        # sees its own steps: what libfaketime adds to the real clock, measured, not assumed.
        if base_ns is None:
            base_ns = time.time_ns() - time.monotonic_ns() - read_offset(self.clock_file) * 10**6
        self.base_ns = base_ns
        self.threads: list[threading.Thread] = []
        self.children: list[int] = []
        self.warnings: dict[str, int] = {}
        self.singles = [0] * args.threads  # IDs from generate(), per thread
        self.batched = [0] * args.threads  # IDs from generate_many(), per thread
        self.slow: dict[int, list[int]] = {}  # generate() calls that took the lock, per generator
        self.generator: Any = None
        self.generation = 0  # generators built in this process (a reset builds another)
        self.resets = 0
        # Fast-path IDs issued while the clock was stepped (between two samples that both saw
        # a step), and the largest step the worker saw on its own clock.
        self.stepped_fast = 0
        self.max_step_ms = 0
        self._sample: tuple[int, int] | None = None
        # The package logs failed renewals with their traceback: count them instead, so that
        # a traceback on stderr means a crash.
        package = logging.getLogger("django_snowflake")
        package.handlers = [_Counter(self.warnings)]
        package.propagate = False

    def install(self) -> None:
        from django_snowflake import get_generator, runtime

        if not getattr(runtime.build, "counted", False):
            build = runtime.build

            def counted_build() -> Any:
                # _current: in a forked child, the child's Worker, not the one patched.
                worker = _current or self
                generator = worker.count_slow(build())
                worker.generation += 1
                return generator

            counted_build.counted = True  # type: ignore[attr-defined]
            runtime.build = counted_build  # every generator, from its first ID
        self.generator = get_generator()
        self.count_slow(self.generator)  # a forked child's generator was built by the parent
        pid_file = {"policy": self.args.policy, "clock": self.clock_file.name}
        (self.run / "pids" / str(self.pid)).write_text(json.dumps(pid_file))
        self.started = time.monotonic()
        self.threads = [
            threading.Thread(target=self.generate, args=(n,), daemon=True)
            for n in range(self.args.threads)
        ]
        for thread in self.threads:
            thread.start()

    def count_slow(self, generator: Any) -> Any:
        """Count the calls of ``generator``'s slow path: every ``generate()`` that did not
        take the fast path ends there, with the generator's lock held, so the count needs no
        lock of its own. Returns ``generator``."""
        if id(generator) in self.slow:
            return generator
        # A forked child inherits its parent's generator with the parent's counter on it.
        slow_path = getattr(generator._next_slow, "uncounted", generator._next_slow)
        counter = self.slow.setdefault(id(generator), [0])

        def counted() -> int:
            value = slow_path()
            counter[0] += 1
            return int(value)

        counted.uncounted = slow_path  # type: ignore[attr-defined]
        generator._next_slow = counted
        return generator

    def generate(self, number: int) -> None:
        from django_snowflake import generate, generate_many
        from django_snowflake.allocators.database import ClockOffsetTooLarge
        from django_snowflake.exceptions import (
            ClockMovedBackwards,
            NoWorkerAvailable,
            WorkerLeaseLost,
        )

        # WorkerLeaseLost covers GeneratorClosed: a reset closed the generator under a call.
        expected = (ClockMovedBackwards, WorkerLeaseLost, NoWorkerAvailable, ClockOffsetTooLarge)
        name = f"{self.pid}-{number}-{self.args.policy}.bin"
        log = IdLog(self.run / "ids" / name)
        self.logs[number] = log
        # Where a reset met this thread: the index of the first ID of a call during which
        # another generator was built. The order is one generator's promise, so the check
        # does not hold the next two IDs to it (an ID of the old generator may come first).
        seams = IdLog(self.run / "seams" / name, capacity=64)
        seen = self.generation
        rate = self.args.rate / self.args.threads  # IDs per second for this thread
        rng = random.Random()
        started = time.monotonic()
        while not self.stop.is_set():
            try:
                roll = rng.random()
                if roll < 0.6:
                    for _ in range(rng.randint(1, 64)):
                        value = generate()
                        if self.generation != seen:
                            seen = self.generation
                            seams.append(log.count + 1)  # 1-based: 0 marks the unwritten
                        log.append(value)
                        self.singles[number] += 1
                else:
                    # Batches, now and then larger than a unit's sequence: exhaustion.
                    batch = generate_many(rng.randint(1, 20_000 if roll > 0.98 else 500))
                    if self.generation != seen:
                        seen = self.generation
                        seams.append(log.count + 1)
                    log.extend(batch)
                    self.batched[number] += len(batch)
            except expected as exc:
                name = type(exc).__name__
                with self.count_lock:
                    self.errors[name] = self.errors.get(name, 0) + 1
                time.sleep(rng.uniform(0.005, 0.05))
            except Exception:
                self.unexpected.append(traceback.format_exc())
                time.sleep(0.1)
            ahead = log.count / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(min(ahead, 0.2))
        log.close()
        seams.close()

    def fast_ids(self) -> int:
        # A copy first: a generator thread adds an entry when it builds a new generator.
        return sum(self.singles) - sum(count[0] for count in self.slow.copy().values())

    def sample_clock(self) -> None:
        """Measure this process's step and count the fast-path IDs issued while stepped."""
        step_ms = (time.time_ns() - time.monotonic_ns() - self.base_ns) // 10**6
        stepped = abs(step_ms) >= 2  # the smallest step the driver makes
        self.max_step_ms = max(self.max_step_ms, abs(step_ms))
        fast = self.fast_ids()
        if stepped and self._sample is not None and self._sample[0]:
            self.stepped_fast += fast - self._sample[1]
        self._sample = (int(stepped), fast)

    def write_stats(self, final: bool = False) -> None:
        lease = None if self.generator is None else self.generator.lease
        with self.count_lock:
            errors = dict(self.errors)
        stats = {
            "pid": self.pid,
            "policy": self.args.policy,
            "written": sum(log.count for log in self.logs if log is not None),
            "single_ids": sum(self.singles),
            "batched_ids": sum(self.batched),
            "fast_path_ids": self.fast_ids(),
            "fast_path_ids_stepped": self.stepped_fast,
            "max_step_seen_ms": self.max_step_ms,
            "resets": self.resets,
            "errors": errors,
            "warnings": dict(self.warnings),
            "unexpected": self.unexpected[:5],
            "unexpected_count": len(self.unexpected),
            "worker_id": None if lease is None else lease.worker_id,
            "offset_ms": read_offset(self.clock_file),
            "final": final,
        }
        path = self.run / "stats" / f"{self.pid}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(stats))
        os.replace(temporary, path)

    def serve(self) -> None:
        """The main thread: stats, forks and resets on request, reaping, a clean exit."""
        from django_snowflake import runtime

        ticks = 0
        while not self.stop.wait(0.1):
            ticks += 1
            if self.reset_requested:
                # Reset under load: the threads go on generating through it; the old
                # generator refuses (GeneratorClosed), the next generate() builds a new one.
                self.reset_requested = False
                runtime.reset()
                self.resets += 1
                # Recorded at once: a SIGKILL before the next periodic write would lose it.
                self.write_stats()
            if self.fork_requested:
                self.fork_requested = False
                self.fork()
            if ticks % 5:
                continue
            self.generator = runtime._generator or self.generator
            self.sample_clock()
            self.write_stats()
            for pid in list(self.children):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    self.children.remove(pid)
        for thread in self.threads:
            thread.join(timeout=30)
        self.write_stats(final=True)

    def fork(self) -> None:
        pid = os.fork()
        if pid:
            self.children.append(pid)
            return
        # The child: the parent's threads do not exist here; start afresh on our own files.
        # It reads the parent's clock file, as processes of one machine share its clock.
        child = Worker(self.args, self.base_ns)
        _install_signals(child)
        child.install()
        child.serve()
        sys.exit(3 if child.unexpected else 0)  # atexit releases the child's slot


def probe_layout(args: argparse.Namespace) -> None:
    """A process started with another layout while the workers hold slots: every attempt
    must be refused with ``LayoutMismatch``; any ID it gets is written, and fails the run."""
    from django_snowflake import generate
    from django_snowflake.allocators.database import ClockOffsetTooLarge
    from django_snowflake.exceptions import LayoutMismatch, WorkerLeaseLost

    run = Path(args.run)
    pid = os.getpid()
    errors: dict[str, int] = {}
    unexpected: list[str] = []
    log = IdLog(run / "ids" / f"{pid}-0-layout.bin", capacity=16)
    # Tries for ``seconds`` after its first answer from the database; a database away (a
    # db_restart) only delays that answer, for 20 s at most.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            log.append(generate())
        except LayoutMismatch:
            if not errors.get("LayoutMismatch"):
                deadline = min(deadline, time.monotonic() + args.seconds)
            errors["LayoutMismatch"] = errors.get("LayoutMismatch", 0) + 1
        except (WorkerLeaseLost, ClockOffsetTooLarge) as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
        except Exception:
            unexpected.append(traceback.format_exc())
        time.sleep(0.05)
    stats = {
        "pid": pid,
        "policy": "layout",
        "probe": True,
        "written": log.count,
        "errors": errors,
        "warnings": {},
        "unexpected": unexpected[:5],
        "unexpected_count": len(unexpected),
    }
    log.close()
    (run / "stats" / f"{pid}.json").write_text(json.dumps(stats))


class _Counter(logging.Handler):
    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__(logging.WARNING)
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        message = record.msg if isinstance(record.msg, str) else str(record.msg)
        self.counts[message] = self.counts.get(message, 0) + 1


_current: Worker | None = None


def _stop(*_: object) -> None:
    # A plain flag, set before set(): is_set() stays false until set() returns, and a signal
    # landing inside it would nest another set().
    if _current is not None and not _current.stopping:
        _current.stopping = True
        _current.stop.set()


def _install_signals(worker: Worker) -> None:
    global _current
    _current = worker
    # The driver repeats SIGTERM until the worker is gone: a signal landing inside set() ran
    # set() again, nested, until RecursionError.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGUSR1, lambda *_: setattr(_current, "fork_requested", True))
    signal.signal(signal.SIGUSR2, lambda *_: setattr(_current, "reset_requested", True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--rate", type=float, default=5000, help="IDs per second, at most")
    parser.add_argument("--policy", default="wait")
    parser.add_argument("--probe-layout", action="store_true", help="see probe_layout()")
    parser.add_argument("--seconds", type=float, default=1.5, help="how long a probe tries")
    args = parser.parse_args(argv)

    import django

    django.setup()
    if args.probe_layout:
        probe_layout(args)
        return
    worker = Worker(args)
    _install_signals(worker)
    worker.install()
    worker.serve()
    if worker.unexpected:
        sys.exit(3)


if __name__ == "__main__":
    main()
