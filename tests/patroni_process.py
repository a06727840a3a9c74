"""A process of the Patroni tests: the settings of a project on a Patroni cluster, and, run as
``python -m tests.patroni_process``, an app that saves rows until told to stop.

The settings are the test settings on the database of the environment
(``SNOWFLAKE_TEST_DB_HOST`` and ``_PORT``: the three nodes, libpq's multi-host string, or
HAProxy's one address), with ``target_session_attrs=read-write`` and a connect timeout in
``OPTIONS``, as docs/high_availability.rst gives them.

The app alternates two inserts into ``testapp_tag``, each in autocommit:
``Tag.objects.create()`` (its key from the process's leased slot) and a raw
``INSERT ... RETURNING id`` (its key from the database's ``django_snowflake_id()``). Once an
insert has returned, its COMMIT acknowledged, it appends ``key, wall clock (us), path`` (0: the
ORM, 1: raw SQL) to ``--out`` as three native int64s. A failed insert closes the connection,
as Django does at the end of a request whose connection broke, and is retried 20 ms later.
With ``--go FILE`` it reports ``ready`` once set up and starts when the file exists.
It reports on stdout ``claiming MS`` before its first insert, ``first MS KEY`` at its first
acknowledged ORM key, then ``seen MS INCARNATION`` (when the WorkerNode rows first saw the
database's incarnation), and at the end ``done ERRORS NAMES``.
"""

from __future__ import annotations

import copy
import os
import time
from array import array
from pathlib import Path

from harness.child import report, set_up, wait_for
from tests.settings import *  # noqa: F403

# A copy: the test process imports this module too (test_patroni), and tests.settings' own
# DATABASES must keep its OPTIONS (SQLite's and MariaDB's drivers refuse these).
DATABASES = copy.deepcopy(DATABASES)  # noqa: F405
DATABASES["default"]["OPTIONS"] = {
    "target_session_attrs": "read-write",
    "connect_timeout": 2,
}

#: One record of ``--out``: the key, when its COMMIT was acknowledged (us), the path.
ORM, RAW = 0, 1


def first_seen() -> tuple[float, str]:
    """When (ms since 1970, the database's clock) the WorkerNode rows first saw the current
    incarnation, and that incarnation."""
    from django.db.models import Min

    from django_snowflake.allocators.database import database_incarnation
    from django_snowflake.models import WorkerNode

    incarnation = database_incarnation("default")
    rows = WorkerNode.objects.filter(incarnation=incarnation)
    since = rows.aggregate(first=Min("incarnation_since"))["first"]
    return since.timestamp() * 1000, incarnation


def save_until(stop: Path, out: Path) -> None:
    from django.db import DatabaseError, connection

    from django_snowflake.exceptions import SnowflakeError
    from tests.testapp.models import Tag

    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    errors: list[str] = []
    report("claiming", int(time.time() * 1000))
    first, seen = True, False
    while not stop.exists():
        for path in (ORM, RAW):
            try:
                if path == ORM:
                    key = Tag.objects.create(name="orm").pk
                else:
                    with connection.cursor() as cursor:
                        cursor.execute("INSERT INTO testapp_tag (name) VALUES ('raw') RETURNING id")
                        (key,) = cursor.fetchone()
            except (DatabaseError, SnowflakeError) as exc:
                errors.append(type(exc).__name__)
                connection.close()
                time.sleep(0.02)
                continue
            acknowledged = time.time()
            os.write(fd, array("q", [key, int(acknowledged * 1e6), path]).tobytes())
            if first and path == ORM:
                first = False
                report("first", int(acknowledged * 1000), key)
        if not first and not seen:
            try:
                report("seen", *first_seen())
                seen = True
            except DatabaseError:
                connection.close()
        time.sleep(0.003)
    os.close(fd)
    report("done", len(errors), *sorted(set(errors)))


def main() -> None:
    args = set_up(go={"help": "report ready, then wait for this file before saving"})
    if args.go:
        report("ready")
        wait_for(args.go)
    save_until(Path(args.stop), Path(args.out))


if __name__ == "__main__":
    main()
