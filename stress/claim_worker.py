"""One process of the claims simulation: ``python -m stress.claim_worker --threads N ...``.

It builds ``N`` generators, each with its own database allocator (so its own claim thread
and connection), as ``N`` separate processes would have. Once ``--start`` exists, every
thread claims a slot at once and reports ``claimed <worker_id> <seconds> <attempts>``; the leases are
held until ``--go`` exists, then each generator issues ``--count`` IDs (written to ``--out``)
and releases its slot. With ``--warm``, each allocator's connection is opened before the gun,
so that only the claim's own queries are timed.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

from harness.child import report, wait_for, write_ids

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out", required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--go", required=True)
    parser.add_argument(
        "--warm", action="store_true", help="open each allocator's connection before the gun"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django_snowflake import runtime
    from django_snowflake.allocators.base import BaseAllocator
    from django_snowflake.allocators.database import DatabaseAllocator

    # Count the compare-and-set attempts of each claim: how much of its time is lost races.
    attempts: dict[int, int] = {}
    claim_once = DatabaseAllocator._claim_once

    def counted(self: DatabaseAllocator, *args: Any, **kwargs: Any) -> Any:
        attempts[id(self)] = attempts.get(id(self), 0) + 1
        return claim_once(self, *args, **kwargs)

    DatabaseAllocator._claim_once = counted  # type: ignore[method-assign]

    generators = [runtime.build() for _ in range(args.threads)]
    if args.warm:
        from django.db import connections

        for generator in generators:
            allocator = generator.lease_source
            assert isinstance(allocator, DatabaseAllocator)
            # The allocator's own thread, as its claim will use: only the claim is timed.
            allocator._run(lambda a=allocator: connections[a.alias].ensure_connection())
    ids: list[list[int]] = [[] for _ in generators]
    report("ready")

    def claim(number: int) -> None:
        generator = generators[number]
        wait_for(args.start)
        started = time.perf_counter()
        try:
            lease = generator.ensure_lease()
        except Exception as exc:
            report("failed", type(exc).__name__, str(exc).replace("\n", " ")[:300])
            return
        took = time.perf_counter() - started
        report("claimed", lease.worker_id, f"{took:.6f}", attempts[id(generator.lease_source)])
        wait_for(args.go)
        ids[number] = generator.next_ids(args.count)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    write_ids(args.out, [value for batch in ids for value in batch])
    for generator in generators:
        assert isinstance(generator.lease_source, BaseAllocator)
        generator.lease_source.close()
    report("done")


if __name__ == "__main__":
    main()
