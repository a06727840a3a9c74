"""One process of the torture run: ``python -m stress.torture_worker RUN_DIR --threads N ...``.

Its threads generate IDs with the process-local generator (the database allocator, the
``SNOWFLAKE`` of ``SNOWFLAKE_TEST_SETTINGS``) and store each one, as it is issued, into one
file per thread (:class:`IdLog`), ``RUN_DIR/ids/<pid>-<thread>-<policy>.bin``, as native
int64s in the order that thread got them, followed by unwritten zeros. The chaos driver
talks to it through files and signals:

* ``RUN_DIR/clock/<pid>``: the offset in ms added to the real clock (the driver rewrites it
  to step this process's clock back or forward); the generator's clock reads it through a
  shared memory map, so a step takes effect at the next reading;
* ``SIGUSR1``: fork, the child being a full worker of its own; ``SIGTERM``: exit
  cleanly (releasing the worker slot);
* ``RUN_DIR/pids/<pid>``: written at start, so the driver knows forked children too;
* ``RUN_DIR/stats/<pid>.json``: rewritten twice a second with the IDs written, the expected
  errors by kind, and the worker ID held.
"""

from __future__ import annotations

import argparse
import json
import logging
import mmap
import os
import random
import signal
import struct
import sys
import threading
import time
import traceback
from array import array
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

OFFSET = struct.Struct("<qq")  # the offset, written twice: a torn read never matches


def write_offset(path: Path, offset_ms: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, OFFSET.pack(offset_ms, offset_ms), 0)
    finally:
        os.close(fd)


def read_offset(path: Path) -> int:
    data = path.read_bytes()
    first, second = OFFSET.unpack(data[: OFFSET.size])
    return first if first == second else 0


class OffsetClock:
    """The real clock plus an offset the chaos driver controls, in ms since 1970."""

    def __init__(self, path: Path, initial_ms: int = 0) -> None:
        write_offset(path, initial_ms)
        fd = os.open(path, os.O_RDONLY)
        try:
            self._map = mmap.mmap(fd, OFFSET.size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)

    def offset(self) -> int:
        while True:
            first, second = OFFSET.unpack_from(self._map)
            if first == second:
                return first

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset()


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
    def __init__(self, args: argparse.Namespace, initial_offset: int = 0) -> None:
        self.args = args
        self.run = Path(args.run)
        self.pid = os.getpid()
        self.stop = threading.Event()
        self.fork_requested = False
        self.errors: dict[str, int] = {}
        self.unexpected: list[str] = []
        self.logs: list[IdLog | None] = [None] * args.threads
        self.count_lock = threading.Lock()
        self.clock = OffsetClock(self.run / "clock" / str(self.pid), initial_offset)
        self.threads: list[threading.Thread] = []
        self.children: list[int] = []
        self.warnings: dict[str, int] = {}
        # The package logs failed renewals with their traceback: count them instead, so that
        # a traceback on stderr means a crash.
        package = logging.getLogger("django_snowflake")
        package.handlers = [_Counter(self.warnings)]
        package.propagate = False

    def install(self) -> None:
        from django_snowflake import get_generator
        from django_snowflake.generator import precise_sleep

        self.generator = get_generator()
        self.generator.use_clock(self.clock, precise_sleep)
        (self.run / "pids" / str(self.pid)).write_text(self.args.policy)
        self.started = time.monotonic()
        self.threads = [
            threading.Thread(target=self.generate, args=(n,), daemon=True)
            for n in range(self.args.threads)
        ]
        for thread in self.threads:
            thread.start()

    def generate(self, number: int) -> None:
        from django_snowflake import generate, generate_many
        from django_snowflake.allocators.database import ClockOffsetTooLarge
        from django_snowflake.exceptions import (
            ClockMovedBackwards,
            NoWorkerAvailable,
            WorkerLeaseLost,
        )

        expected = (ClockMovedBackwards, WorkerLeaseLost, NoWorkerAvailable, ClockOffsetTooLarge)
        log = IdLog(self.run / "ids" / f"{self.pid}-{number}-{self.args.policy}.bin")
        self.logs[number] = log
        rate = self.args.rate / self.args.threads  # IDs per second for this thread
        rng = random.Random()
        started = time.monotonic()
        while not self.stop.is_set():
            try:
                roll = rng.random()
                if roll < 0.6:
                    for _ in range(rng.randint(1, 64)):
                        log.append(generate())
                else:
                    # Batches, now and then larger than a unit's sequence: exhaustion.
                    log.extend(generate_many(rng.randint(1, 20_000 if roll > 0.98 else 500)))
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

    def write_stats(self, final: bool = False) -> None:
        lease = self.generator.lease
        with self.count_lock:
            errors = dict(self.errors)
        stats = {
            "pid": self.pid,
            "policy": self.args.policy,
            "written": sum(log.count for log in self.logs if log is not None),
            "errors": errors,
            "warnings": dict(self.warnings),
            "unexpected": self.unexpected[:5],
            "unexpected_count": len(self.unexpected),
            "worker_id": None if lease is None else lease.worker_id,
            "offset_ms": self.clock.offset(),
            "final": final,
        }
        path = self.run / "stats" / f"{self.pid}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(stats))
        os.replace(temporary, path)

    def serve(self) -> None:
        """The main thread: stats, forks on request, reaping, a clean exit on SIGTERM."""
        while not self.stop.wait(0.5):
            self.write_stats()
            if self.fork_requested:
                self.fork_requested = False
                self.fork()
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
        offset = self.clock.offset()
        pid = os.fork()
        if pid:
            self.children.append(pid)
            return
        # The child: the parent's threads do not exist here; start afresh on our own files.
        child = Worker(self.args, offset)
        _install_signals(child)
        child.install()
        child.serve()
        sys.exit(3 if child.unexpected else 0)  # atexit releases the child's slot


class _Counter(logging.Handler):
    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__(logging.WARNING)
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        message = record.msg if isinstance(record.msg, str) else str(record.msg)
        self.counts[message] = self.counts.get(message, 0) + 1


_current: Worker | None = None


def _install_signals(worker: Worker) -> None:
    global _current
    _current = worker
    signal.signal(signal.SIGTERM, lambda *_: _current.stop.set())  # type: ignore[union-attr]
    signal.signal(signal.SIGUSR1, lambda *_: setattr(_current, "fork_requested", True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--rate", type=float, default=5000, help="IDs per second, at most")
    parser.add_argument("--policy", default="wait")
    args = parser.parse_args(argv)

    import django

    django.setup()
    worker = Worker(args)
    _install_signals(worker)
    worker.install()
    worker.serve()
    if worker.unexpected:
        sys.exit(3)


if __name__ == "__main__":
    main()
