"""A separate process for the lease tests: ``python -m tests.worker_process MODE ...``.

It runs on the test database named by the environment (``SNOWFLAKE_TEST_DB``,
``SNOWFLAKE_TEST_DB_NAME``, ``SNOWFLAKE_TEST_SETTINGS``), writes the IDs it generated to
``--out`` as native int64s, and reports on stdout one line per event, e.g. ``claimed 3 0.004``.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path

from harness.child import claim, report, wait_for, write_ids

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def generate(args: argparse.Namespace) -> None:
    from django_snowflake import generate as next_id

    if args.start:
        report("ready")  # set up: the claim follows the starting gun at once
        wait_for(args.start)
    claim()
    wait_for(args.go)
    write_ids(args.out, [next_id() for _ in range(args.count)])
    report("done")


def fork(args: argparse.Namespace) -> None:
    from django_snowflake import decode
    from django_snowflake import generate as next_id

    ids = [next_id() for _ in range(args.count)]
    children = []
    for number in range(args.children):
        pid = os.fork()
        if pid == 0:
            child_ids = [next_id() for _ in range(args.count)]
            write_ids(f"{args.out}.child{number}", child_ids)
            report("child", decode(child_ids[0]).worker_id)
            os._exit(0)
        children.append(pid)
    ids += [next_id() for _ in range(args.count)]
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    write_ids(args.out, ids)
    report("parent", decode(ids[0]).worker_id)


def hold(args: argparse.Namespace) -> None:
    """Generate until killed, appending every ID to ``--out`` as it is issued."""
    from django_snowflake import generate as next_id

    claim()
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    while True:
        os.write(fd, array("q", [next_id()]).tobytes())


def outage(args: argparse.Namespace) -> None:
    """Generate until ``--go`` exists, reporting when IDs stop and when they resume."""
    from django_snowflake import generate as next_id
    from django_snowflake.exceptions import WorkerLeaseLost

    claim()
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    issuing = True
    while not Path(args.go).exists():
        try:
            value = next_id()
        except WorkerLeaseLost:
            if issuing:
                report("stopped")
                issuing = False
            time.sleep(0.05)
            continue
        os.write(fd, array("q", [value]).tobytes())
        if not issuing:
            report("resumed")
            issuing = True
        time.sleep(0.001)
    report("done")


def setup(args: argparse.Namespace) -> None:
    """Report the lease held right after ``django.setup()``, then after the first request
    begins (``CLAIM_ON_READY`` claims there, or at the first database connection)."""
    from django.core.signals import request_started

    from django_snowflake import get_generator

    for line in ("setup", "lease"):
        lease = get_generator().lease
        report(line, "none" if lease is None else lease.worker_id)
        request_started.send(sender=None)


def first(args: argparse.Namespace) -> None:
    """Report ``id VALUE SECONDS``: the first ID of a process whose first act is ``--order``
    (``CLAIM_ON_READY`` claims at the first request or connection, whichever comes first).

    A process that has no ID ``--within`` seconds after ``ready`` prints every thread's stack
    to stderr and exits (faulthandler), so that a hang shows where each thread waits.
    """
    import asyncio

    from asgiref.sync import sync_to_async
    from django.db import connection
    from django.test import Client

    from django_snowflake import generate as next_id
    from tests.testapp.models import Customer

    def on_thread() -> int:
        """The first ID on a thread of its own; then this thread opens its first connection."""
        ids: list[int] = []
        thread = threading.Thread(target=lambda: ids.append(next_id()))
        thread.start()
        thread.join()
        connection.ensure_connection()
        return ids[0]

    async def generate_in_task() -> int:
        return next_id()  # on the event loop, as an async view building a model does

    async def in_task() -> int:
        """The first ID in a task; then another task's thread opens a connection."""
        value, _ = await asyncio.gather(
            generate_in_task(),
            sync_to_async(Customer.objects.count, thread_sensitive=False)(),
        )
        return value

    acts: dict[str, Callable[[], int]] = {
        "id": next_id,
        "model": lambda: Customer(name="first").pk,
        "connection": lambda: (connection.ensure_connection(), next_id())[1],
        "request": lambda: (Client().get("/admin/login/"), next_id())[1],
        "thread": on_thread,
        "async": lambda: asyncio.run(in_task()),
    }
    report("ready")
    faulthandler.dump_traceback_later(args.within, exit=True)
    started = time.perf_counter()
    value = acts[args.order]()
    faulthandler.cancel_dump_traceback_later()
    report("id", value, f"{time.perf_counter() - started:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["generate", "fork", "hold", "outage", "setup", "first"])
    parser.add_argument("--out", default="")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--children", type=int, default=3)
    parser.add_argument("--start", help="report ready, then wait for this file before claiming")
    parser.add_argument("--go", help="wait for this file after claiming")
    parser.add_argument("--order", help="first: what the process does first")
    parser.add_argument("--within", type=float, default=5.0, help="first: seconds to the ID")
    args = parser.parse_args()

    import django

    django.setup()
    modes = {
        "generate": generate,
        "fork": fork,
        "hold": hold,
        "outage": outage,
        "setup": setup,
        "first": first,
    }
    modes[args.mode](args)


if __name__ == "__main__":
    main()
