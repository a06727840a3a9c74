"""The parent's side: read a child's report lines, reap children, read the IDs they wrote."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def expect_line(
    process: subprocess.Popen[str], prefix: str, timeout: float | None = None
) -> list[str]:
    """The words of the next stdout line of ``process``, which must start with ``prefix``.

    Raises ``RuntimeError`` naming the line otherwise (an empty one: the child exited), or
    when the line came more than ``timeout`` seconds after the call. The read itself blocks:
    a child that never writes is killed by :func:`reap` when the caller gives up.
    """
    started = time.monotonic()
    line = process.stdout.readline() if process.stdout else ""
    if timeout is not None and time.monotonic() - started > timeout:
        raise RuntimeError(f"process {process.pid}: no {prefix!r} line in {timeout} s")
    words = line.split()
    if not words or words[0] != prefix:
        raise RuntimeError(f"process {process.pid}: expected {prefix!r}, got {line!r}")
    return words


class Lines:
    """The stdout lines of a process, read by a thread, so that waiting for one can time out."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.queue.put(line)

    def next(self, deadline: float) -> str:
        """The next line, or ``""`` once ``deadline`` (monotonic) has passed."""
        try:
            return self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return ""


def reap(processes: Iterable[subprocess.Popen[Any]]) -> None:
    """Kill every process still running, wait for each and close its stdout.

    Called in a ``finally``: a failed run leaves no child holding a worker slot or a pipe.
    """
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout:
            process.stdout.close()


def read_ids(path: Path) -> list[int]:
    """The IDs a child wrote with :func:`harness.child.write_ids`."""
    ids = array("q")
    ids.frombytes(path.read_bytes())
    return ids.tolist()


def run_python(*args: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    """Run ``python *args`` to its end: its exit code, and its output (stdout, then stderr)."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr


def json_report(module: str, *args: str, cwd: Path, settings: str, **environ: str) -> Any:
    """Run ``python -m module *args`` with ``settings`` as its Django settings module (and
    ``environ`` added to this process's environment) to a successful end, and return the JSON
    of its last line of output: how the tests read the report of a throwaway project."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings, **environ}
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
