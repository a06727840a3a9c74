"""One claimant of the claim benchmark, in a fresh interpreter.

``python -m benchmarks.claim_process START GO``: sets Django up and reports ``ready``,
waits for the file START, claims a worker slot and reports ``claimed WORKER SECONDS`` (the
shared harness's :func:`harness.child.claim`), then holds the slot until GO exists so
that every claimant of a herd holds one at the same time, and releases it at exit.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

from harness.child import claim, report, wait_for


def main() -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connections

    # Load the database driver now (psycopg takes ~0.1 s to import): the claim is timed
    # from its first query's connection on, as in a server that has served requests.
    connections[settings.SNOWFLAKE["DATABASE"]]
    report("ready")
    wait_for(sys.argv[1])
    claim()
    wait_for(sys.argv[2])


if __name__ == "__main__":
    main()
