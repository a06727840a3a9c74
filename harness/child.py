"""The child interpreter's side: its command line, one report line per event, barrier files,
IDs on disk.

A parent reads the lines with :func:`harness.processes.expect_line` and the IDs with
:func:`harness.processes.read_ids`.
"""

from __future__ import annotations

import argparse
import os
import time
from array import array
from pathlib import Path
from typing import Any


def set_up(**options: dict[str, Any]) -> argparse.Namespace:
    """Parse the command line of a child that writes to the file ``--out`` until the file
    ``--stop`` exists, and its own ``options`` (``name={...}``: ``--name`` and the keywords of
    ``add_argument``), then set Django up on the settings of its environment; the arguments."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop", required=True)
    for name, keywords in options.items():
        parser.add_argument(f"--{name}", **keywords)
    args = parser.parse_args()

    import django

    django.setup()
    return args


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
