"""A Galera cluster's nodes as Django sees them, for tests/test_galera.py: a process's
environment, ``migrate`` and ``check`` through a node, and keys from the nodes' database
functions, drawn through one node or all at once, with the slots recorded for them."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness import galera

from .components import component_marks
from .ha_servers import ROOT

DATABASE = "galera"
#: What this machine lacks to run a cluster (the tests skip, but in CI, where they fail).
MISSING = galera.missing()
#: The marks of the Galera test modules (``pytestmark``).
MARKS = component_marks(pytest.mark.galera, "mariadb", "Galera", MISSING)
#: The configuration of the pytest run, whose terminal the measurements go to.
REPORTER: list[pytest.Config] = []


def report(line: str) -> None:
    """A measurement, printed past pytest's capture (``-s`` not needed)."""
    for config in REPORTER:
        plugins = config.pluginmanager
        with plugins.getplugin("capturemanager").global_and_fixture_disabled():
            plugins.getplugin("terminalreporter").write_line(f"[galera] {line}")


def started_cluster(pytestconfig: pytest.Config) -> Iterator[galera.Galera]:
    """The ``cluster`` fixture's: 3 nodes, and the WorkerNode table's database on them."""
    REPORTER[:] = [pytestconfig]
    if MISSING:
        pytest.fail(f"The Galera tests must run in CI, but {MISSING} is missing.")
    started = time.monotonic()
    nodes = galera.Galera()
    try:
        report(f"3-node Galera cluster started in {time.monotonic() - started:.1f} s")
        nodes.nodes[0].sql(f"CREATE DATABASE {DATABASE}")
        migrate(nodes.nodes[0], DATABASE, "django_snowflake", "0002_incarnation")
        yield nodes
    finally:
        nodes.close()


def environment(port: int, database: str = DATABASE, path: str = "") -> dict[str, str]:
    """The environment of a Django process on the node (or proxy) at ``port``; ``path`` is
    its ``SNOWFLAKE["MARIADB_KEYS"]`` (by default the setting's default)."""
    return {
        **({"SNOWFLAKE_TEST_MARIADB_KEYS": path} if path else {}),
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_DB": "mariadb",
        "SNOWFLAKE_TEST_DB_HOST": "127.0.0.1",
        "SNOWFLAKE_TEST_DB_PORT": str(port),
        "SNOWFLAKE_TEST_DB_USER": "root",
        "SNOWFLAKE_TEST_DB_NAME": database,
    }


def manage(
    node: galera.Node, database: str, *command: str, path: str = ""
) -> subprocess.CompletedProcess[str]:
    """``manage.py <command>`` through ``node`` (``path``: see :func:`environment`)."""
    return subprocess.run(
        [sys.executable, "-m", "django", *command],
        cwd=ROOT,
        env=environment(node.port, database, path),
        capture_output=True,
        text=True,
    )


def migrate(
    node: galera.Node, database: str, *target: str, path: str = ""
) -> subprocess.CompletedProcess[str]:
    return manage(node, database, "migrate", *target, "-v0", path=path)


def check_through(node: galera.Node, database: str, path: str = "") -> str:
    """What ``check --database default`` says through ``node``."""
    done = manage(node, database, "check", "--database", "default", path=path)
    return done.stdout + done.stderr


def show_worker(node: galera.Node, database: str, path: str = "") -> dict[str, Any]:
    """``show_worker --json`` through ``node``."""
    done = manage(node, database, "show_worker", "--json", path=path)
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


def killed_while_drawing(node: galera.Node, database: str) -> list[int]:
    """The keys ``node``'s function gave for a second, until the node was killed (kill -9)
    in the middle of its draws."""
    drawn: list[int] = []
    stop = threading.Event()

    def load() -> None:
        connection = connect(node, database)
        with contextlib.suppress(Exception):
            cursor = connection.cursor()
            while not stop.is_set():
                cursor.execute("SELECT django_snowflake_id() FROM seq_1_to_50")
                drawn.extend(row[0] for row in cursor.fetchall())

    loader = threading.Thread(target=load)
    loader.start()
    time.sleep(1)
    node.kill()
    stop.set()
    loader.join()
    return drawn
