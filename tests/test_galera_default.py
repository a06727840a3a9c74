"""MariaDB's column-default path on a private 3-node Galera cluster (issue 26).

One ``migrate`` through node 1 gives every keyed column a ``DEFAULT`` that chooses, by
``@@wsrep_node_name``, the node's own sequence and slot, and one function over the same
expression, all replicated: no trigger, and nodes that advertise no address are served too.
Each node's heartbeat moves only its own sequence. tests/test_galera.py tests the strict path
(a function per node) on the same cluster.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time

import pytest

from django_snowflake.layout import BitLayout
from django_snowflake.vendors.mysql.keys import NO_SLOT_SEQUENCE, KeyClock
from harness import galera

from .galera_keys import (
    MARKS,
    check_through,
    draw_keys,
    killed_while_drawing,
    manage,
    migrate,
    node_slots,
    on_every_node,
    report,
    show_worker,
)
from .interface import CASES

LAYOUT = BitLayout.preset("twitter")
PER_NODE = int(os.environ.get("SNOWFLAKE_GALERA_KEYS", "2000"))

pytestmark = MARKS


def migrated(node: galera.Node, database: str, path: str = "") -> None:
    done = migrate(node, database, path=path)
    assert done.returncode == 0, done.stderr[-2000:]


def heartbeat(node: galera.Node, database: str) -> None:
    """What each process's heartbeat does once a second, through ``node``: move the clocks."""
    done = manage(
        node,
        database,
        "shell",
        "-c",
        "from django_snowflake.database_keys import move_database_clocks as m; assert not m()",
    )
    assert done.returncode == 0, done.stderr[-2000:]


def unit_ms(key: int) -> float:
    return LAYOUT.decompose(key).timestamp.timestamp() * 1000


def assert_own_slots(drawn: dict[str, list[int]], database: str, node: galera.Node) -> None:
    slots = node_slots(node, database)
    for name, values in drawn.items():
        assert {LAYOUT.decompose(value).worker_id for value in values} == {slots[name]}


def test_one_migrate_serves_every_node_even_those_that_advertise_no_address(
    cluster: galera.Galera,
) -> None:
    """Every node started with ``wsrep_node_incoming_address = AUTO`` (MariaDB's default):
    ``migrate`` through node 1 alone serves the three, with no trigger; raw INSERTs and the
    function on the three nodes at once share no key, each node's under its own slot, and
    ``show_worker`` and ``check`` through node 2 see it served. On the strict path nodes 2
    and 3 refused every key until ``migrate`` ran through each (tests/test_galera.py). The
    first heartbeat on nodes 2 and 3 keeps their keys at the clock: ``migrate`` read their
    runs (until 05c4dd4 it skipped them a minute ahead)."""
    database = "galera_default"
    for node in cluster.nodes:
        node.stop()
        node.start(incoming="AUTO")
    try:
        cluster.nodes[0].sql(f"CREATE DATABASE {database}")
        started = time.monotonic()
        migrated(cluster.nodes[0], database)
        seconds = time.monotonic() - started
        table = cluster.nodes[1].sql("SHOW CREATE TABLE testapp_tag", database)
        for node in cluster.nodes:
            assert KeyClock(node.name).sequence in table
        assert cluster.nodes[2].sql("SHOW TRIGGERS", database) == ""
        for node in cluster.nodes[1:]:
            heartbeat(node, database)  # its first: migrate recorded its run, nothing to skip
        drawn_at = time.time() * 1000
        drawn, firsts = on_every_node(cluster.nodes, database, PER_NODE)
        ahead = {name: (unit_ms(min(values)) - drawn_at) / 1000 for name, values in drawn.items()}
        assert max(ahead.values()) < 5, ahead  # a skip was LEASE_SECONDS + 2 s: 62 s
        everything = [value for values in drawn.values() for value in values]
        duplicates = len(everything) - len(set(everything))
        assert duplicates == 0 and len(everything) == 3 * PER_NODE
        assert_own_slots(drawn, database, cluster.nodes[0])
        others = [KeyClock(node.name).sequence for node in cluster.nodes[1:]]
        untouched = (
            f"SELECT {', '.join(f'(SELECT next_not_cached_value FROM {s})' for s in others)}"
        )
        before = cluster.nodes[0].sql(untouched, database)
        draw_keys(cluster.nodes[0], database, 300)
        assert cluster.nodes[0].sql(untouched, database) == before  # CASE took node 1's branch
        (function,) = show_worker(cluster.nodes[1], database)["database_functions"]
        assert {node["function"] for node in function["galera_nodes"]} == {"own"}, function
        assert function["where"] == "node node2" and function["behind_ms"] is not None
        words = manage(cluster.nodes[1], database, "show_worker").stdout
        for node in cluster.nodes:
            assert f"Galera node {node.name}: slot " in words, words
        assert words.count(", keys of its own") == 3, words
        said = check_through(cluster.nodes[1], database)
        assert "W058" not in said and "W054" not in said, said
    finally:
        for node in cluster.nodes:
            node.stop()
            node.start()  # the addresses the other tests reach the nodes at
    report(
        f"column default, nodes that advertise no address: one migrate through node 1 "
        f"({seconds:.1f} s) serves 3 nodes; {len(everything):,} keys drawn at once "
        f"(half by raw INSERT), {duplicates} duplicates; first key: "
        + ", ".join(f"{name} {first * 1000:.0f} ms" for name, first in sorted(firsts.items()))
        + f"; after the first heartbeat on nodes 2 and 3, keys {max(ahead.values()):.2f} s ahead"
    )


def test_a_node_absent_from_migrate_is_served_after_a_migrate_through_any_node(
    cluster: galera.Galera,
) -> None:
    """Node 3 is down while a database is migrated: the keys' expression does not name it,
    so on its return its INSERTs that leave the key out fail, naming the sequence that says to
    run migrate, and ``check`` through it says W058; ``migrate`` through node 1 again serves
    it, under a slot of its own."""
    n1, n2, n3 = cluster.nodes
    database = "galera_default_late"
    n3.stop()
    try:
        n1.sql(f"CREATE DATABASE {database}")
        migrated(n1, database)
    finally:
        n3.start()
    with pytest.raises(subprocess.CalledProcessError) as refused:
        n3.sql("INSERT INTO testapp_tag (name) VALUES ('late')", database)
    assert NO_SLOT_SEQUENCE in refused.value.stderr
    said = check_through(n3, database)
    # Issue 32: the column default's W058 says what is true of its path, not the trigger's.
    assert "django_snowflake.W058" in said and "not yet in the cluster" in said, said
    assert "wsrep_node_incoming_address" not in said and "state transfer" not in said, said
    migrated(n1, database)
    assert "W058" not in check_through(n3, database)
    drawn, _ = on_every_node(cluster.nodes, database, 300)
    everything = [value for values in drawn.values() for value in values]
    assert len(set(everything)) == 900
    assert_own_slots(drawn, database, n2)
    report("column default, a node down at migrate: refused, served after migrate through node 1")


def test_every_method_of_the_interface_on_a_node(cluster: galera.Galera) -> None:
    """The per-database interface on a real node: tests/interface.py's cases (those
    tests/test_vendors.py runs on one server) on node 2's class, Galera, after a ``migrate``
    through node 1. Every method is implemented there."""
    n1, n2, _ = cluster.nodes
    database = "galera_interface"
    n1.sql(f"CREATE DATABASE {database}")
    migrated(n1, database)
    code = (
        "import json; from django.db import connection; "
        "from django_snowflake.vendors import database; "
        "from tests.interface import CASES, exercise; db = database(connection); "
        "print(json.dumps({'class': type(db).__name__, "
        "**{name: exercise(db, name) for name in sorted(CASES)}}))"
    )
    done = manage(n2, database, "shell", "-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found.pop("class") == "Galera"
    assert found == dict.fromkeys(CASES, "implemented")


def test_each_node_keeps_its_clock_with_no_process_running(cluster: galera.Galera) -> None:
    """Issue 32: ``migrate`` through node 1 makes each node it reaches an event of its own,
    with replication off (MariaDB runs a replicated event on one node only), which moves that
    node's clock: after 10 s with no process, raw keys through node 2 are within a second of
    its clock; ``check --deploy`` through node 2 says nothing of it, and says W059 with the
    event disabled there."""
    n1, n2, _ = cluster.nodes
    database = "galera_default_tick"
    n1.sql(f"CREATE DATABASE {database}")
    migrated(n1, database)
    for node in cluster.nodes:
        node.sql("SET GLOBAL event_scheduler = ON")
        assert f"node={node.name}" in node.sql(
            f"SELECT event_comment FROM information_schema.EVENTS WHERE event_schema = '{database}'"
        )
    time.sleep(10)
    lags = []
    for _ in range(6):
        key, now = n2.sql(
            "INSERT INTO testapp_tag (name) VALUES ('raw'); "
            "SELECT MAX(id), UNIX_TIMESTAMP(SYSDATE(3)) * 1000 FROM testapp_tag",
            database,
        ).split("\t")
        lags.append(float(now) - unit_ms(int(key)))
        time.sleep(0.2)
    print("lags (ms):", sorted(lags))
    assert all(-50 < lag < 1000 for lag in lags), lags
    deploy = ("check", "--deploy", "--database", "default")
    done = manage(n2, database, *deploy)
    assert "W059" not in done.stdout + done.stderr, done.stdout + done.stderr
    n2.sql("SET SESSION wsrep_on = OFF; ALTER EVENT django_snowflake_id_tick DISABLE", database)
    done = manage(n2, database, *deploy)
    said = done.stdout + done.stderr
    assert "django_snowflake.W059" in said and "disabled" in said, said


def test_a_node_killed_and_rejoined_skips_at_its_first_heartbeat(cluster: galera.Galera) -> None:
    """Node 3 is killed (kill -9) while raw INSERTs draw its sequence, and restarted (IST):
    its first heartbeat (a new ``wsrep_gcomm_uuid``: a new incarnation) skips its sequence
    past anything it issued; keys drawn before that heartbeat are measured, not assumed."""
    n1, _, n3 = cluster.nodes
    database = "galera_default_rejoin"
    n1.sql(f"CREATE DATABASE {database}")
    migrated(n1, database)
    heartbeat(n3, database)
    before = killed_while_drawing(n3, database)
    n3.start()
    early, _ = draw_keys(n3, database, 200)  # before any heartbeat on the node's new run
    heartbeat(n3, database)
    drawn_at = time.time() * 1000
    after, _ = draw_keys(n3, database, PER_NODE)
    ahead = (unit_ms(min(after)) - drawn_at) / 1000
    runs = [before, early, after]
    everything = [value for values in runs for value in values]
    duplicates = len(everything) - len(set(everything))
    early_above = min(early) > max(before)
    report(
        f"column default, node 3 killed while drawing ({len(before):,} keys) and rejoined: "
        f"{len(early)} keys before its first heartbeat, "
        f"{'all' if early_above else 'NOT all'} above the old run's; after the heartbeat "
        f"{ahead:.1f} s ahead (the skip); {duplicates} duplicates"
    )
    assert before and duplicates == 0
    assert min(after) > max(before + early) and ahead > 2


def test_the_paths_switch_on_galera_and_back_without_a_repeat(cluster: galera.Galera) -> None:
    """A database on the strict path (a function per node) moves to the column default and
    back by ``migrate`` through node 1: on each node, every phase's keys are above the phase
    before (node 1 sets the other nodes' sequences only while no node draws them), and the
    three nodes, drawing at once in each phase, never repeat a key."""
    n1 = cluster.nodes[0]
    database = "galera_default_switch"
    n1.sql(f"CREATE DATABASE {database}")
    phases: list[dict[str, list[int]]] = []
    for path in ("trigger", "default", "trigger", "default"):
        migrated(n1, database, path)
        drawn, _ = on_every_node(cluster.nodes, database, 300)
        phases.append(drawn)
        triggers = cluster.nodes[1].sql("SHOW TRIGGERS", database)
        assert (triggers != "") == (path == "trigger"), (path, triggers)
    everything = [value for drawn in phases for values in drawn.values() for value in values]
    assert len(everything) == len(set(everything)) == 4 * 3 * 300
    for node in cluster.nodes:
        for earlier, later in itertools.pairwise(phases):
            assert min(later[node.name]) > max(earlier[node.name]), node.name
    report("the paths switched on Galera, trigger -> default -> trigger -> default: 0 repeats")
