"""The child interpreter's side: one report line per event, barrier files, IDs on disk.

A parent reads the lines with :func:`harness.processes.expect_line` and the IDs with
:func:`harness.processes.read_ids`.
"""

from __future__ import annotations

import os
import time
from array import array
from pathlib import Path


def report(*words: object) -> None:
    """Write ``words`` as one stdout line, e.g. ``claimed 3 0.004``."""
    # One write(2) per line: forked processes share the pipe, and short writes are atomic.
    os.write(1, (" ".join(map(str, words)) + "\n").encode())


def write_ids(path: str, ids: list[int]) -> None:
    """Store ``ids`` at ``path`` as native int64s."""
    with open(path, "wb") as out:
        array("q", ids).tofile(out)


def wait_for(path: str | None) -> None:
    """Return once the barrier file ``path`` exists (at once when it is ``None``)."""
    while path and not Path(path).exists():
        time.sleep(0.005)


def claim() -> None:
    """Claim this process's worker slot and report ``claimed WORKER SECONDS``."""
    from django_snowflake import get_generator

    generator = get_generator()
    started = time.perf_counter()
    lease = generator.ensure_lease()
    report("claimed", lease.worker_id, f"{time.perf_counter() - started:.6f}")
