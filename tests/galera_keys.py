"""A Galera cluster's nodes as Django sees them, for tests/test_galera.py: a process's
environment, ``migrate`` and ``check`` through a node, and keys from the nodes' database
functions, drawn through one node or all at once, with the slots recorded for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from harness import galera

from .ha_servers import ROOT

DATABASE = "galera"


def environment(port: int, database: str = DATABASE) -> dict[str, str]:
    """The environment of a Django process on the node (or proxy) at ``port``."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_DB": "mariadb",
        "SNOWFLAKE_TEST_DB_HOST": "127.0.0.1",
        "SNOWFLAKE_TEST_DB_PORT": str(port),
        "SNOWFLAKE_TEST_DB_USER": "root",
        "SNOWFLAKE_TEST_DB_NAME": database,
    }


def migrate(node: galera.Node, database: str, *target: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "django", "migrate", *target, "-v0"]
    return subprocess.run(
        command, cwd=ROOT, env=environment(node.port, database), capture_output=True, text=True
    )


def check_through(node: galera.Node, database: str) -> str:
    """What ``check --database default`` says through ``node``."""
    command = [sys.executable, "-m", "django", "check", "--database", "default"]
    done = subprocess.run(
        command, cwd=ROOT, env=environment(node.port, database), capture_output=True, text=True
    )
    return done.stdout + done.stderr


def show_worker(node: galera.Node, database: str) -> dict[str, Any]:
    """``show_worker --json`` through ``node``."""
    command = [sys.executable, "-m", "django", "show_worker", "--json"]
    done = subprocess.run(
        command, cwd=ROOT, env=environment(node.port, database), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def connect(node: galera.Node, database: str) -> Any:
    import MySQLdb

    return MySQLdb.connect(
        host="127.0.0.1", port=node.port, user="root", database=database, autocommit=True
    )


def draw_keys(node: galera.Node, database: str, count: int) -> tuple[list[int], float]:
    """``count`` keys from ``node``'s function, half by SELECT and half by raw INSERTs into
    ``testapp_tag`` (read back by their names); the seconds to the first key."""
    connection = connect(node, database)
    try:
        cursor = connection.cursor()
        started = time.monotonic()
        cursor.execute("SELECT django_snowflake_id()")
        first = time.monotonic() - started
        values = [cursor.fetchone()[0]]
        cursor.execute(f"SELECT django_snowflake_id() FROM seq_1_to_{count // 2 - 1}")
        values += [row[0] for row in cursor.fetchall()]
        tag = f"{node.name}-{time.monotonic_ns()}"
        for chunk in range(0, count - count // 2, 100):  # a statement per 100 rows
            rows = min(100, count - count // 2 - chunk)
            cursor.execute(
                "INSERT INTO testapp_tag (name) "
                f"SELECT CONCAT('{tag}-', seq) FROM seq_{chunk + 1}_to_{chunk + rows}"
            )
        cursor.execute("SELECT id FROM testapp_tag WHERE name LIKE %s", [f"{tag}-%"])
        values += [row[0] for row in cursor.fetchall()]
        return values, first
    finally:
        connection.close()


def on_every_node(
    nodes: list[galera.Node], database: str, count: int
) -> tuple[dict[str, list[int]], dict[str, float]]:
    """Each node's keys and time to its first key, drawn on all nodes at once."""
    drawn: dict[str, tuple[list[int], float]] = {}

    def work(node: galera.Node) -> None:
        drawn[node.name] = draw_keys(node, database, count)

    threads = [threading.Thread(target=work, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(drawn) == len(nodes), "a node's draws failed (see the thread's traceback)"
    return {name: values for name, (values, _) in drawn.items()}, {
        name: first for name, (_, first) in drawn.items()
    }


def node_slots(node: galera.Node, database: str) -> dict[str, int]:
    """The worker IDs the coordination database recorded for each node's function."""
    rows = node.sql(
        "SELECT label, worker_id FROM django_snowflake_workernode "
        "WHERE label LIKE 'database:default@%'",
        database,
    )
    return {
        label.split("@")[1]: int(worker)
        for label, worker in (line.split("\t") for line in rows.splitlines())
    }
