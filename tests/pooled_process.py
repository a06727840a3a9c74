"""A process of the PgBouncer tests: the settings a project behind a pooler uses, and, run as
``python -m tests.pooled_process``, an app that inserts rows with the ORM from its threads.

It runs on the database of its environment (``SNOWFLAKE_TEST_DB_PORT``: the pooler's port,
``SNOWFLAKE_TEST_DB_NAME``, ``SNOWFLAKE_TEST_SETTINGS``). Each of ``--threads`` threads opens
its connection and keeps it (as a request thread under a persistent ``CONN_MAX_AGE`` does),
then saves ``Tag`` rows (``SnowflakeAutoField``: the process's leased slot makes the key)
until ``--stop`` exists, getting over a lost connection as Django's request cycle would.
It reports on stdout ``connected`` once every thread holds its connection, ``first SECONDS``
(from then to its first saved row), ``failed`` and ``resumed NAMES`` around the first thread's
failed saves (the names of the errors they raised), and ``done ERRORS NAMES`` (how many saves failed, the errors' names); the
keys of the saved rows go to ``--out`` as native int64s.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.child import report, set_up, write_ids
from tests.settings import *  # noqa: F403

# Transaction pooling gives a client's next transaction to any server connection: a cursor
# declared WITH HOLD would be left on another one (Django's docs, "Transaction pooling and
# server-side cursors"). psycopg's prepared statements are off already: Django passes
# prepare_threshold=None unless OPTIONS says otherwise.
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True  # noqa: F405
DATABASES["default"]["CONN_MAX_AGE"] = None  # noqa: F405


def save_until(stop: Path, connected: threading.Barrier, keys: list[int], errors: list[str],
               speaker: bool) -> None:  # fmt: skip
    from django.db import DatabaseError, connection

    from django_snowflake.exceptions import WorkerLeaseLost
    from tests.testapp.models import Tag

    connection.ensure_connection()
    connected.wait()
    started, failing = time.monotonic(), set[str]()
    while not stop.exists():
        try:
            tag = Tag.objects.create(name="pooled")
        except (DatabaseError, WorkerLeaseLost) as exc:
            errors.append(type(exc).__name__)
            if speaker and not failing:
                report("failed")
            failing.add(type(exc).__name__)
            # What Django does at the end of a request whose connection broke.
            connection.close_if_unusable_or_obsolete()
            time.sleep(0.05)
            continue
        if speaker and not keys:
            report("first", f"{time.monotonic() - started:.3f}")
        if speaker and failing:
            report("resumed", *sorted(failing))
        failing.clear()
        keys.append(tag.pk)
        time.sleep(0.002)
    connection.close()


def main() -> None:
    args = set_up(threads={"type": int, "default": 1})
    connected = threading.Barrier(args.threads + 1)
    keys: list[list[int]] = [[] for _ in range(args.threads)]
    errors: list[str] = []
    threads = [
        threading.Thread(
            target=save_until,
            args=(Path(args.stop), connected, keys[number], errors, number == 0),
        )
        for number in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    connected.wait()
    report("connected")
    for thread in threads:
        thread.join()
    write_ids(args.out, [key for own in keys for key in own])
    report("done", len(errors), *sorted(set(errors)))


if __name__ == "__main__":
    main()
