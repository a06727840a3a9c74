"""A probe run by hand: ``python -m benchmarks.galera`` (needs Debian's galera-4 and rsync, as
the Galera tests do).

On a private 3-node cluster (``harness.galera``), one-row INSERTs through the three nodes at
once (``CONNECTIONS`` per node, threads each with its own connection, autocommit) into the
switch's table, whose key the database makes, against an ``AUTO_INCREMENT`` table in the same
database that leaves its key out, in alternating turns; each path of ``MARIADB_KEYS``,
installed by ``migrate`` through node 1; INSERTs that leave the key out (raw SQL) and that give
it (as Django's ``create()`` does under the switch). Writes ``benchmarks/probes/galera.json``;
docs/high_availability.rst quotes it.

Not a section of ``python -m benchmarks``: a cluster takes a machine's every core, and on
Galera each key's ``NOCACHE`` draw is a write replicated with its statement, so the numbers
say what Galera costs, not what the package costs on one server.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any

from harness import galera

from .common import ProbeRecord, insert_rate, rotated

PATHS = ("default", "trigger")
MODES = ("left_out", "given")
CONNECTIONS = 4
ROUNDS = 3
TURN_SECONDS = 4.0
AUTO = "bench_auto"


@contextlib.contextmanager
def node_connections(
    ports: list[int], database: str, *, per_node: int = CONNECTIONS, session: str = ""
) -> Iterator[list[Any]]:
    """``per_node`` autocommit connections to each node (by its port), each having run
    ``session`` first if given; closed after the block."""
    import MySQLdb

    opened = [
        MySQLdb.connect(
            host="127.0.0.1", port=port, user="root", database=database, autocommit=True
        )
        for port in ports
        for _ in range(per_node)
    ]
    try:
        for connection in opened if session else []:
            connection.cursor().execute(session)
        yield opened
    finally:
        for connection in opened:
            connection.close()


def probe_start(
    cluster: galera.Galera, name: str, doc: str, rounds: int, turn_seconds: float
) -> tuple[list[int], str, ProbeRecord]:
    """A probe's nodes (their ports), the server's version and the probe's record."""
    ports = [node.port for node in cluster.nodes]
    server = cluster.nodes[0].sql("SELECT VERSION()").strip()
    record = ProbeRecord(
        name, doc, connections_per_node=CONNECTIONS, turn_seconds=turn_seconds, rounds=rounds
    )
    return ports, server, record


def _rate(ports: list[int], database: str, table: str, given: bool) -> float:
    """Rows/s of one-row INSERTs from ``CONNECTIONS`` connections per node for a turn."""
    with node_connections(ports, database) as connections:
        return insert_rate(connections, table, TURN_SECONDS, column="label", given=given)


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
        ports, server, record = probe_start(cluster, "galera", __doc__, ROUNDS, TURN_SECONDS)
        results: dict[str, Any] = {}
        for path, mode in itertools.product(PATHS, MODES):
            table = _install(path)
            given = mode == "given"
            ratios = []
            for round_ in range(ROUNDS):
                # The baseline leaves its key out, as Django's BigAutoField does.
                rates = {
                    name: _rate(ports, database, name, given and name == table)
                    for name in rotated((table, AUTO), round_)
                }
                record.turn_done()
                ratios.append(round(rates[table] / rates[AUTO], 3))
                print(
                    f"{path:8} key {mode:8} round {round_ + 1}: keyed {rates[table]:,.0f} "
                    f"rows/s, AUTO_INCREMENT {rates[AUTO]:,.0f}, {ratios[-1]:.2f}x",
                    flush=True,
                )
            results[f"{path}/{mode}"] = sorted(ratios)
    finally:
        cluster.close()
    record.write(server, ratios=results)


if __name__ == "__main__":
    main()
