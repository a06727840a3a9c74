"""The end-of-run check of the ID files: no duplicate, and order where the policy promises it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# The rollback policies under which one generator's IDs strictly increase. Under ``ring``
# and ``clock_sequence`` a rollback inside the bound issues lower (still unique) IDs.
MONOTONIC_POLICIES = frozenset({"raise", "wait", "borrow"})


def load(path: Path) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The IDs of ``path``: its int64s up to the last non-zero one (the files are memory
    maps grown ahead of their writes, and no ID is 0)."""
    ids = np.fromfile(path, dtype="=i8", count=path.stat().st_size // 8)
    written = np.flatnonzero(ids)
    return ids[: int(written[-1]) + 1 if written.size else 0]


def check_files(files: list[Path], seams: Path | None = None) -> dict[str, Any]:
    """Check ID files named ``<pid>-<thread>-<policy>.bin`` (one thread's IDs, in order).

    ``seams`` is a directory of files of the same names: where a reset replaced the
    generator under that thread, the 1-based index of the first ID of the call it met (the
    order is one generator's promise, so a drop at that ID or the next is not counted).
    Returns the number of IDs, the duplicates (count and up to 10 examples with the files
    holding them), the files whose IDs do not strictly increase although their policy
    promises it, and the negative IDs.
    """
    arrays = []
    out_of_order: list[dict[str, Any]] = []
    checked_order = 0
    for path in sorted(files):
        ids = load(path)
        arrays.append(ids)
        policy = path.stem.rsplit("-", 1)[-1]
        if policy in MONOTONIC_POLICIES and ids.size > 1:
            checked_order += int(ids.size)
            drops = np.flatnonzero(ids[1:] <= ids[:-1])
            if seams is not None and (seams / path.name).exists():
                # drops[k] + 1 is the index of the lower ID; a seam s (1-based) excuses the
                # IDs at indexes s - 1 and s.
                at_seam = load(seams / path.name) - 1
                excused = np.union1d(at_seam, at_seam + 1)
                drops = drops[~np.isin(drops + 1, excused)]
            if drops.size:
                at = int(drops[0])
                out_of_order.append(
                    {
                        "file": path.name,
                        "index": at + 1,
                        "previous": int(ids[at]),
                        "value": int(ids[at + 1]),
                        "count": int(drops.size),
                    }
                )
    everything = np.concatenate(arrays) if arrays else np.zeros(0, dtype="<i8")
    everything.sort()
    repeated = everything[1:][everything[1:] == everything[:-1]]
    examples = [int(v) for v in np.unique(repeated)[:10]]
    where = {
        value: [path.name for path in files if bool(np.any(load(path) == value))]
        for value in examples
    }
    return {
        "ids": int(everything.size),
        "duplicates": int(repeated.size),
        "duplicate_examples": where,
        "order_checked_ids": checked_order,
        "out_of_order": out_of_order,
        "negative": int(np.count_nonzero(everything < 0)),
    }
