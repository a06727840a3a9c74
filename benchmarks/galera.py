"""A probe run by hand: ``python -m benchmarks.galera`` (needs Debian's galera-4 and rsync, as
the Galera tests do).

On a private 3-node cluster (``harness.galera``), one-row INSERTs through the three nodes at
once (``CONNECTIONS`` per node, threads each with its own connection, autocommit) into the
switch's table, whose key the database makes, against an ``AUTO_INCREMENT`` table in the same
database, in alternating turns; each path of ``MARIADB_KEYS``, installed by ``migrate``
through node 1; INSERTs that leave the key out (raw SQL) and that give it (as Django's
``create()`` does under the switch). Writes ``benchmarks/probes/galera.json``;
docs/high_availability.rst quotes it.

Not a section of ``python -m benchmarks``: a cluster takes a machine's every core, and on
Galera each key's ``NOCACHE`` draw is a write replicated with its statement, so the numbers
say what Galera costs, not what the package costs on one server.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import galera

PATHS = ("default", "trigger")
MODES = ("left_out", "given")
CONNECTIONS = 4
#: Above the number of threads (3 nodes x CONNECTIONS), for the keys a turn gives.
THREADS = 64
ROUNDS = 3
TURN_SECONDS = 4.0
AUTO = "bench_auto"
RECORD = Path(__file__).resolve().parent / "probes" / "galera.json"


def _rate(ports: list[int], database: str, table: str, given: bool) -> float:
    """Rows/s of one-row INSERTs from ``CONNECTIONS`` connections per node for a turn."""
    import MySQLdb

    counts: list[int] = []
    end = time.monotonic() + TURN_SECONDS

    def work(index: int, port: int) -> None:
        connection = MySQLdb.connect(
            host="127.0.0.1", port=port, user="root", database=database, autocommit=True
        )
        with closing(connection):
            cursor = connection.cursor()
            count = 0
            # Given keys never repeat: the turn's start in microseconds, the thread, the row.
            key = int(time.time() * 1_000_000) * THREADS + index
            while time.monotonic() < end:
                if given:
                    cursor.execute(
                        f"INSERT INTO {table} (id, label) VALUES (%s, 'x')",
                        [key + count * THREADS],
                    )
                else:
                    cursor.execute(f"INSERT INTO {table} (label) VALUES ('x')")
                count += 1
            counts.append(count)

    threads = [
        threading.Thread(target=work, args=(index, port))
        for index, port in enumerate(p for p in ports for _ in range(CONNECTIONS))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / TURN_SECONDS


def _install(path: str) -> str:
    """``migrate`` through node 1 on ``path``, and the switch's table made anew (its key the
    database's: the column default or the trigger)."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from django.test.utils import override_settings

    from .databases import recreate_table
    from .switchapp.models import SqlRow

    with override_settings(SNOWFLAKE={**settings.SNOWFLAKE, "MARIADB_KEYS": path}):
        call_command("migrate", "django_snowflake", database="mariadb", verbosity=0)
        recreate_table(SqlRow, "mariadb")
    connections["mariadb"].close()
    return str(SqlRow._meta.db_table)


def main() -> None:
    cluster = galera.Galera()
    try:
        first, *_ = cluster.nodes
        database = "snowflake_bench_galera"
        first.sql(f"CREATE DATABASE {database}")
        first.sql(
            f"CREATE TABLE {AUTO} (id BIGINT AUTO_INCREMENT PRIMARY KEY, label VARCHAR(100))",
            database,
        )
        os.environ.update(
            SNOWFLAKE_TEST_DB_HOST="127.0.0.1",
            SNOWFLAKE_TEST_DB_PORT=str(first.port),
            SNOWFLAKE_TEST_DB_USER="root",
            SNOWFLAKE_TEST_DB_PASSWORD="",
            SNOWFLAKE_BENCH_NAME=database,
            DJANGO_SETTINGS_MODULE="benchmarks.settings",
        )
        import django
        from django.core.management import call_command

        django.setup()
        from .settings import BENCH_DIR

        BENCH_DIR.mkdir(parents=True, exist_ok=True)  # the WorkerNode table's SQLite file
        call_command("migrate", database="default", verbosity=0)
        ports = [node.port for node in cluster.nodes]
        server = first.sql("SELECT VERSION()").strip()
        load = os.getloadavg()
        results: dict[str, Any] = {}
        for path, mode in itertools.product(PATHS, MODES):
            table = _install(path)
            given = mode == "given"
            ratios = []
            for round_ in range(ROUNDS):
                # Alternate which side goes first, so a drift of the machine favours neither.
                order = (table, AUTO) if round_ % 2 == 0 else (AUTO, table)
                rates = {name: _rate(ports, database, name, given) for name in order}
                ratios.append(rates[table] / rates[AUTO])
                print(
                    f"{path:8} key {mode:8} round {round_ + 1}: keyed {rates[table]:,.0f} "
                    f"rows/s, AUTO_INCREMENT {rates[AUTO]:,.0f}, {ratios[-1]:.2f}x",
                    flush=True,
                )
            results[f"{path}/{mode}"] = sorted(ratios)
    finally:
        cluster.close()
    RECORD.write_text(
        json.dumps(
            {
                "when": datetime.now(UTC).isoformat(timespec="seconds"),
                "server": server,
                "load_average_before": load,
                "nodes": 3,
                "connections_per_node": CONNECTIONS,
                "rounds": ROUNDS,
                "turn_seconds": TURN_SECONDS,
                "ratios_to_auto_increment": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written: {RECORD}")


if __name__ == "__main__":
    main()
