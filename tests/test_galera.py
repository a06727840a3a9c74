"""A MariaDB Galera cluster as the coordination database (docs: "High-availability databases").

A real 3-node cluster (``harness/galera.py``) started once for the module on private loopback
ports, and real processes (``python -m tests.ha_servers``) issuing IDs through its nodes:
a claim storm over the three nodes, a takeover across nodes that meets a certification
conflict, ``kill -9`` of a node and its rejoin, processes behind a round-robin proxy,
and a cluster bootstrapped anew. Every scenario checks 0 duplicate IDs, 0 slots held by two
processes at once, and that a process issues within a second of starting (outside a real
failover). And the database function (raw SQL's keys), each node's own after ``migrate``
through one node: drawn on the three nodes at once, across a node's kill -9, restart and
rejoin from an empty datadir, on a node down during the first ``migrate``, and replacing the
refusal of the version before; 0 duplicate keys, each node's under its own slot.

Run under ``SNOWFLAKE_TEST_DB=mariadb`` (``-m galera`` selects them). Without galera-4 they
skip, except under ``CI``, where they fail. ``SNOWFLAKE_GALERA_SECONDS`` sets how long each
scenario issues (default 3 s: the short form, about two minutes with the cluster's start),
``SNOWFLAKE_GALERA_KEYS`` how many keys each node draws from the function (default 2,000).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_snowflake.layout import BitLayout
from harness import galera
from harness.private_server import free_port
from harness.processes import read_ids

from .galera_keys import (
    DATABASE,
    MARKS,
    check_through,
    connect,
    draw_keys,
    environment,
    killed_while_drawing,
    migrate,
    node_slots,
    on_every_node,
    report,
    show_worker,
)
from .ha_servers import ROOT, Router
from .test_failover import Worker

#: The keys from the database here take the strict path, a function of its own per node
#: (tests/test_galera_default.py: the column default).
TRIGGER = "trigger"
LAYOUT = BitLayout.preset("twitter")
SECONDS = float(os.environ.get("SNOWFLAKE_GALERA_SECONDS", "3"))
TABLE = "django_snowflake_workernode"

pytestmark = MARKS


class Nodes:
    """What a process of the failover tests asks of its servers: its environment."""

    def env(self, *servers: galera.Node | RoundRobin, database: str) -> dict[str, str]:
        (server,) = servers
        return {
            key: value
            for key, value in environment(server.port).items()
            if key in os.environ or key.startswith("SNOWFLAKE_TEST_DB")
        }


class Process(Worker):
    """A ``tests.ha_servers`` process issuing IDs through one node or proxy, from ``go`` on."""

    def __init__(
        self, tmp_path: Path, name: str, server: galera.Node | RoundRobin, go: Path, lease: int
    ) -> None:
        super().__init__(Nodes(), tmp_path, name, [server], lease, go)  # type: ignore[arg-type]
        self.name = name

    def stopped(self) -> list[str]:
        """The lines, so far, that said the process stopped issuing."""
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return [" ".join(words) for words in self.seen if words[0] == "stopped"]


class RoundRobin(Router):
    """A TCP proxy that gives each new connection to the next of ``nodes`` in ``live``, as
    a load balancer in front of a cluster does (its health check takes a dead node out)."""

    def __init__(self, nodes: list[galera.Node]) -> None:
        self.live = [node.port for node in nodes]
        self._turn = itertools.count()
        super().__init__(nodes[0].port)

    @property
    def target(self) -> int:
        return self.live[next(self._turn) % len(self.live)]

    @target.setter
    def target(self, port: int) -> None:
        pass  # the proxy keeps its rotation


@pytest.fixture
def proxy(cluster: galera.Galera) -> Iterator[RoundRobin]:
    balancer = RoundRobin(cluster.nodes)
    yield balancer
    balancer.close()


Server = galera.Node | RoundRobin


def start(
    workers: list[Process], tmp_path: Path, servers: dict[str, Server], go: Path, lease: int = 60
) -> list[Process]:
    """One process per name in ``servers``, each set up and waiting for ``go``."""
    new = [Process(tmp_path, name, server, go, lease) for name, server in servers.items()]
    workers.extend(new)
    for worker in new:
        worker.wait("ready")
    return new


def go_and_time(workers: list[Process], go: Path) -> dict[str, float]:
    """Fire the starting gun; each process's time from it to its first ID, in seconds."""
    fired = time.time() * 1000
    go.touch()
    return {worker.name: (int(worker.wait("first")[1]) - fired) / 1000 for worker in workers}


def first_id_bound() -> float:
    """Seconds within which a process issues its first ID: one, on a machine loaded no more
    than four times its cores (measured 0.14 to 0.70 s); more on one shared by several test
    runs (1.17 s at a load of 14 per core)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1) / 4)


def unit_ms(value: int) -> float:
    return LAYOUT.decompose(value).timestamp.timestamp() * 1000


def check(ids: dict[str, list[int]]) -> tuple[int, int, int]:
    """IDs, duplicates and slot overlaps (a slot whose IDs from two processes interleave in
    time) among the processes' ``ids``."""
    everything = [value for values in ids.values() for value in values]
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for values in ids.values():
        by_slot: dict[int, list[float]] = defaultdict(list)
        for value in values:
            by_slot[LAYOUT.decompose(value).worker_id].append(unit_ms(value))
        for slot, times in by_slot.items():
            spans[slot].append((min(times), max(times)))
    overlaps = 0
    for intervals in spans.values():
        intervals.sort()
        overlaps += sum(b[0] <= a[1] for a, b in itertools.pairwise(intervals))
    return len(everything), len(everything) - len(set(everything)), overlaps


def summary(scenario: str, ids: dict[str, list[int]], firsts: dict[str, float]) -> None:
    checked, duplicates, overlaps = check(ids)
    per_node: dict[str, list[float]] = defaultdict(list)
    for name, seconds in firsts.items():
        per_node[name.split("-")[0]].append(seconds)
    times = ", ".join(
        f"{node} max {max(values):.3f} s" for node, values in sorted(per_node.items())
    )
    report(
        f"{scenario}: {checked:,} IDs, {duplicates} duplicates, {overlaps} overlaps; "
        f"first ID after start: {times}"
    )
    assert (duplicates, overlaps) == (0, 0)
    assert checked > 0


def test_every_node_reports_the_cluster_as_one_incarnation(cluster: galera.Galera) -> None:
    """Before: ``server_id@host:port``, so each node was another incarnation."""
    code = "from django_snowflake.allocators.failover import _incarnation as i; print(i('default'))"
    seen = set()
    for node in cluster.nodes:
        done = subprocess.run(
            [sys.executable, "-c", f"import django; django.setup(); {code}"],
            cwd=ROOT, env=environment(node.port), capture_output=True, text=True, check=True,
        )  # fmt: skip
        seen.add(done.stdout.strip())
    state = cluster.nodes[0].status("wsrep_cluster_state_uuid")
    assert seen == {f"('galera:{state}', True)"}


def test_a_claim_storm_over_the_three_nodes(
    cluster: galera.Galera, workers: list[Process], tmp_path: Path
) -> None:
    """Processes through every node claim at once with the default lease. Before: the first
    node to write held the table's incarnation, and a claim through another node waited as
    after a failover (75 s)."""
    go = tmp_path / "go"
    per_node = int(os.environ.get("SNOWFLAKE_GALERA_PROCESSES", "3"))
    servers: dict[str, Server] = {
        f"node{node.number}-{n}": node for node in cluster.nodes for n in range(per_node)
    }
    storm = start(workers, tmp_path, servers, go)
    firsts = go_and_time(storm, go)
    time.sleep(SECONDS)
    ids = {worker.name: worker.finish() for worker in storm}
    summary(f"claim storm, {len(storm)} processes", ids, firsts)
    assert max(firsts.values()) < first_id_bound(), firsts
    assert not [worker.stopped() for worker in storm if worker.stopped()]


def test_processes_behind_a_round_robin_proxy(
    proxy: RoundRobin, workers: list[Process], tmp_path: Path
) -> None:
    """Each claim and renewal (every second: a 3 s lease) opens a connection, which the proxy
    gives to the next node; a second wave of processes starts after the first has renewed
    through every node. Before: each node was an incarnation of its own, so the second wave
    met rows of other incarnations and waited as after a failover."""
    go, again = tmp_path / "go", tmp_path / "again"
    first = start(workers, tmp_path, {f"proxy-{n}": proxy for n in range(3)}, go, lease=3)
    firsts = go_and_time(first, go)
    time.sleep(2.5)  # two renewals each, spread over the nodes
    second = start(workers, tmp_path, {f"proxy-{n}": proxy for n in range(3, 6)}, again, lease=3)
    firsts |= go_and_time(second, again)
    time.sleep(max(SECONDS, 3))
    ids = {worker.name: worker.finish() for worker in first + second}
    summary("round-robin proxy, 2 waves of 3 processes, 3 s lease", ids, firsts)
    assert max(firsts.values()) < first_id_bound(), firsts
    assert not [worker.stopped() for worker in first + second if worker.stopped()]


def test_a_takeover_across_nodes_meets_a_certification_conflict(
    cluster: galera.Galera,
    workers: list[Process],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A holder through node 1 is paused past its lease; a process through node 2 takes its
    slot over while node 1 is still applying a large write committed before it, so the
    holder's renewal on node 1 reads its row as it was and fails certification (1213).
    Before: the holder stopped with "database error"; now the renewal runs again once node
    1 has caught up, finds the slot taken over, and the holder claims another at once."""
    n1, n2, _ = cluster.nodes
    go = tmp_path / "go"
    # The server runs a conflicting autocommit statement once more itself by default, and
    # that retry reads the row afresh; the conflict reaches the client when it conflicts
    # again, or with no retry:
    n1.sql("SET GLOBAL wsrep_retry_autocommit = 0")
    (holder,) = start(workers, tmp_path, {"node1-holder": n1}, go, lease=3)
    go.touch()
    slot = int(holder.wait("first")[2])
    time.sleep(1)
    os.kill(holder.process.pid, signal.SIGSTOP)
    try:
        go_c = tmp_path / "go_c"
        (taker,) = start(workers, tmp_path, {"node2-taker": n2}, go_c, lease=3)
        n2.sql(
            "CREATE TABLE IF NOT EXISTS lag (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; "
            "INSERT IGNORE INTO lag SELECT seq, 0 FROM seq_1_to_500000",
            DATABASE,
        )
        caught_up(n1)
        time.sleep(3 + 0.5)  # the holder's lease has expired
        n2.sql("UPDATE lag SET v = v + 1", DATABASE)  # node 1 applies it in seconds
        firsts = go_and_time([taker], go_c)
    finally:
        os.kill(holder.process.pid, signal.SIGCONT)
    behind = caught_up(n1)
    n1.sql("SET GLOBAL wsrep_retry_autocommit = DEFAULT")
    time.sleep(SECONDS)
    ids = {worker.name: worker.finish() for worker in (holder, taker)}
    summary(f"takeover across nodes (node 1 {behind:.2f} s behind)", ids, firsts)
    assert not holder.stopped()
    slots = [{LAYOUT.decompose(value).worker_id for value in ids[name]} for name in ids]
    assert len(slots[0]) == 2 and slots[1] == {slot}, "the taker took the holder's slot"
    assert "concurrent write" in capfd.readouterr().err, "no certification conflict met"


def transfer_since(node: galera.Node, logged: int) -> str:
    """How ``node`` last rejoined, from its log past ``logged`` characters: "SST" or "IST".
    The server logs "SST received" and "IST received" after an SST too (an IST of what the
    cluster committed meanwhile follows it); the rsync script says which it ran."""
    log = node.log.read_text(errors="replace")[logged:]
    return "SST" if "SST completed on joiner" in log else "IST"


def caught_up(node: galera.Node) -> float:
    """Seconds until ``node`` has applied every write the cluster committed."""
    started = time.monotonic()
    node.sql("SET SESSION wsrep_sync_wait = 1; SELECT 1", timeout=120)
    return time.monotonic() - started


def test_kill_9_of_a_node_and_its_rejoin(
    cluster: galera.Galera, proxy: RoundRobin, workers: list[Process], tmp_path: Path
) -> None:
    """Processes through each node and through a proxy; node 3 is killed (kill -9) and
    restarted. The others wait for node 3 until they evict it (``evs.suspect_timeout``, 3 s
    here), so a 3 s lease may run out on any process; all issue again after the eviction,
    and those through node 3 resume once it has rejoined."""
    n3 = cluster.nodes[2]
    go = tmp_path / "go"
    servers: dict[str, Server] = {f"node{node.number}": node for node in cluster.nodes}
    servers |= {f"proxy-{n}": proxy for n in range(2)}
    running = start(workers, tmp_path, servers, go, lease=3)
    firsts = go_and_time(running, go)
    time.sleep(1)
    n3.kill()
    killed = time.monotonic()
    proxy.live.remove(n3.port)
    on_n3 = next(worker for worker in running if worker.name == "node3")
    on_n3.wait("stopped", timeout=15)
    time.sleep(1)
    restarted, logged = time.monotonic(), len(n3.log.read_text(errors="replace"))
    n3.start()
    rejoined, rejoin_seconds = time.time() * 1000, time.monotonic() - restarted
    proxy.live.append(n3.port)
    on_n3.wait("resumed", timeout=30)
    resumed = time.monotonic() - killed
    transfer = transfer_since(n3, logged)
    time.sleep(SECONDS)
    ids = {worker.name: worker.finish() for worker in running}
    paused = [worker.name for worker in running if worker.stopped() and worker is not on_n3]
    summary(
        f"kill -9 of node 3: rejoined by {transfer} in {rejoin_seconds:.1f} s, "
        f"its process resumed {resumed:.1f} s after the kill; {len(paused)} of "
        f"{len(running) - 1} others paused during the eviction",
        ids,
        firsts,
    )
    assert all(max(map(unit_ms, values)) > rejoined for values in ids.values())
    assert max(firsts.values()) < first_id_bound(), firsts


KEYS = "galera_keys"
#: Keys each node draws in the scenarios of the database function: half by SELECT, half by
#: raw INSERTs into a migrated table keyed by the function (its trigger).
PER_NODE = int(os.environ.get("SNOWFLAKE_GALERA_KEYS", "2000"))


@pytest.fixture(scope="module")
def keys(cluster: galera.Galera) -> str:
    """A database migrated through node 1: every node has its function, under its slot."""
    cluster.nodes[0].sql(f"CREATE DATABASE {KEYS}")
    started = time.monotonic()
    done = migrate(cluster.nodes[0], KEYS, path=TRIGGER)
    assert done.returncode == 0, done.stderr[-2000:]
    report(f"migrate through node 1 (the function on 3 nodes): {time.monotonic() - started:.1f} s")
    return KEYS


def test_the_database_function_on_every_node_at_once(cluster: galera.Galera, keys: str) -> None:
    """``migrate`` through node 1 installs on every node a function of its own, over
    sequences only that node draws, under a slot of its own; the three nodes draw at once.
    Before: the function refused on every node (one sequence drawn on two nodes at once
    repeats values: 1,926 duplicates of 3,000)."""
    slots = node_slots(cluster.nodes[0], keys)
    assert sorted(slots) == ["node1", "node2", "node3"] and len(set(slots.values())) == 3
    drawn, firsts = on_every_node(cluster.nodes, keys, PER_NODE)
    everything = [value for values in drawn.values() for value in values]
    duplicates = len(everything) - len(set(everything))
    report(
        f"the database function on 3 nodes at once: {len(everything):,} keys "
        f"({PER_NODE:,} per node, half by raw INSERT), {duplicates} duplicates, slots "
        + ", ".join(f"{name} {worker}" for name, worker in sorted(slots.items()))
        + "; first key: "
        + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in sorted(firsts.items()))
    )
    assert duplicates == 0
    for name, values in drawn.items():
        assert len(values) == PER_NODE
        assert {LAYOUT.decompose(value).worker_id for value in values} == {slots[name]}
    (function,) = show_worker(cluster.nodes[0], keys, path=TRIGGER)["database_functions"]
    assert function["where"] == "node node1"
    assert {
        node["node"]: (node["slot"], node["function"]) for node in function["galera_nodes"]
    } == {name: (f"{worker}/0", "own") for name, worker in slots.items()}


def wipe(node: galera.Node) -> None:
    """Empty ``node``'s datadir: it rejoins by a full state transfer (SST) from a donor."""
    shutil.rmtree(node.data)
    node.data.mkdir()
    if galera.USER:
        shutil.chown(node.data, "mysql", "mysql")


def rejoin(node: galera.Node, keys: str) -> tuple[str, float, str]:
    """Start ``node`` again: how it rejoined (IST or SST), in how many seconds, and what its
    function said to its first call (``""``: it issued)."""
    started, logged = time.monotonic(), len(node.log.read_text(errors="replace"))
    node.start()
    seconds = time.monotonic() - started
    transfer = transfer_since(node, logged)
    try:
        node.sql("SELECT django_snowflake_id()", keys)
    except subprocess.CalledProcessError as refused:
        return transfer, seconds, refused.stderr
    return transfer, seconds, ""


def test_a_node_killed_and_rejoined_issues_above_its_keys(
    cluster: galera.Galera, keys: str
) -> None:
    """Node 3 is killed (kill -9) while it draws keys, and restarted; then stopped and
    restarted (IST); then restarted from an empty datadir (SST). Each new run of the node (a
    new ``wsrep_gcomm_uuid``) skips its clock past anything it issued. After an SST the
    donor's function came with the copy: it refuses on node 3, saying to migrate through it,
    and issues again once ``migrate`` ran through node 3. The other nodes issue meanwhile."""
    n3 = cluster.nodes[2]
    before = killed_while_drawing(n3, keys)
    runs = [before]
    lines = [f"node 3 drew {len(before):,} keys until kill -9"]
    others: list[int] = []
    for how in ("kill -9", "restart", "empty datadir"):
        if how == "restart":
            n3.stop()
        elif how == "empty datadir":
            n3.stop()
            wipe(n3)
        transfer, seconds, refusal = rejoin(n3, keys)
        if transfer == "SST":
            assert "(a state transfer copied it)" in refusal, (how, refusal)
            done = migrate(n3, keys, path=TRIGGER)
            assert done.returncode == 0, done.stderr[-2000:]
        else:
            assert not refusal, refusal
        drawn_at = time.time() * 1000
        values, first = draw_keys(n3, keys, PER_NODE)
        ahead = (unit_ms(min(values)) - drawn_at) / 1000
        assert ahead > 2, "no skip of the clock at the node's new run"
        runs.append(values)
        drawn, _ = on_every_node(cluster.nodes[:2], keys, PER_NODE // 4)
        others += [value for values in drawn.values() for value in values]
        lines.append(
            f"{how}: rejoined by {transfer} in {seconds:.1f} s"
            + (", refused until migrate through it" if refusal else "")
            + f", first key in {first * 1000:.0f} ms ({ahead:.1f} s ahead: the skip),"
            f" {len(values):,} keys"
        )
    everything = [value for values in runs for value in values] + others
    duplicates = len(everything) - len(set(everything))
    report("; ".join(lines) + f"; {len(everything):,} keys in all, {duplicates} duplicates")
    assert before and duplicates == 0
    assert all(min(later) > max(earlier) for earlier, later in itertools.pairwise(runs))
    assert "SST" in lines[-1]


def issues_under_its_slot(node: galera.Node, database: str) -> None:
    """``node``'s function issues keys under the slot recorded for that node."""
    values, _ = draw_keys(node, database, 100)
    assert {LAYOUT.decompose(value).worker_id for value in values} == {
        node_slots(node, database)[node.name]
    }


def refuses_until_migrated_through(node: galera.Node, database: str) -> None:
    """``node`` has no function of its own (the refusal of the first install) until
    ``migrate`` runs through it; then it issues under its own slot."""
    with pytest.raises(subprocess.CalledProcessError) as refused:
        node.sql("SELECT django_snowflake_id()", database)
    assert "no Snowflake function of its own" in refused.value.stderr
    done = migrate(node, database, path=TRIGGER)
    assert done.returncode == 0, done.stderr[-2000:]
    issues_under_its_slot(node, database)


def test_a_node_down_during_the_first_migrate_refuses_until_migrated_through(
    cluster: galera.Galera,
) -> None:
    """Node 3 is stopped while a new database is migrated through node 1: it rejoins (IST)
    with the refusal the first install replicated to every node, which says what to run, and
    ``check`` does not stop that ``migrate``; migrated through node 3, it issues under a slot
    of its own."""
    n3, database = cluster.nodes[2], "galera_late"
    n3.stop()
    try:
        cluster.nodes[0].sql(f"CREATE DATABASE {database}")
        done = migrate(cluster.nodes[0], database, path=TRIGGER)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        n3.start()
    refuses_until_migrated_through(n3, database)
    report("a node down during the first migrate: refused, then migrated through it: issues")


def test_a_node_migrate_cannot_reach_keeps_the_refusal_and_the_log_says_which(
    cluster: galera.Galera,
) -> None:
    """Node 3 tells the cluster an address where nothing listens (a firewall, a wrong
    ``wsrep_node_incoming_address``): ``migrate`` through node 1 installs the other nodes'
    functions, logs that node 3's was not installed and why, and node 3 keeps the refusal of
    the first install until ``migrate`` runs through it."""
    n3, database = cluster.nodes[2], "galera_unreached"
    nowhere = f"127.0.0.1:{free_port()}"
    n3.stop()
    n3.start(incoming=nowhere)
    try:
        cluster.nodes[0].sql(f"CREATE DATABASE {database}")
        done = migrate(cluster.nodes[0], database, path=TRIGGER)
        assert done.returncode == 0, done.stderr[-2000:]
        said = f"was NOT installed on Galera node node3: unreachable at {nowhere}"
        assert said in done.stderr, done.stderr[-2000:]
        for node in cluster.nodes[:2]:
            issues_under_its_slot(node, database)
        refuses_until_migrated_through(n3, database)
    finally:
        n3.stop()
        n3.start()  # the address the other tests' migrate reaches it at
    report("a node migrate cannot reach: logged, refused, then migrated through it: issues")


def test_nodes_that_advertise_no_address_are_named_and_checked(cluster: galera.Galera) -> None:
    """Every node started with ``wsrep_node_incoming_address = AUTO``, MariaDB's default
    (``wsrep_incoming_addresses`` reads ``AUTO,AUTO,AUTO``): ``migrate`` through node 1
    installs node 1's function and names nodes 2 and 3 as not installed, with what to run;
    ``check`` through node 2 reports that node (W058); after ``migrate`` through nodes 2 and
    3, raw SQL through the three nodes gets keys, 0 duplicates. Before: ``migrate`` said
    nothing, ``check`` said nothing, and nodes 2 and 3 refused every key."""
    database = "galera_auto"
    for node in cluster.nodes:
        node.stop()
        node.start(incoming="AUTO")
    try:
        assert cluster.nodes[0].status("wsrep_incoming_addresses") == "AUTO,AUTO,AUTO"
        cluster.nodes[0].sql(f"CREATE DATABASE {database}")
        done = migrate(cluster.nodes[0], database, path=TRIGGER)
        assert done.returncode == 0, done.stderr[-2000:]
        for name in ("node2", "node3"):
            assert (
                f"was NOT installed on Galera node {name}: it does not advertise where "
                "clients reach it (wsrep_node_incoming_address = AUTO)" in done.stderr
            ), done.stderr[-2000:]
        assert "--database=default connected to that node" in done.stderr
        listed = show_worker(cluster.nodes[0], database, path=TRIGGER)["database_functions"][0]
        unread = {node["node"] for node in listed["galera_nodes"] if node["function"] is None}
        assert unread == {"node2", "node3"}, listed
        said = check_through(cluster.nodes[1], database, path=TRIGGER)
        assert "django_snowflake.W058" in said and "Galera node node2 " in said, said
        assert "W058" not in check_through(cluster.nodes[0], database, path=TRIGGER)
        for node in cluster.nodes[1:]:
            refuses_until_migrated_through(node, database)
        assert "W058" not in check_through(cluster.nodes[1], database, path=TRIGGER)
        drawn, _ = on_every_node(cluster.nodes, database, 300)
        everything = [value for values in drawn.values() for value in values]
        assert len(everything) == 900 and len(set(everything)) == 900
    finally:
        for node in cluster.nodes:
            node.stop()
            node.start()  # the addresses the other tests' migrate reaches the nodes at
    report("nodes that advertise no address: named by migrate and check, then migrated: issue")


def test_migrate_replaces_the_refusal_of_the_version_before(
    cluster: galera.Galera, keys: str
) -> None:
    """The version before refused on every Galera node (comment ``galera=unsupported``):
    ``migrate`` through node 1, checks included, gives every node its own function."""
    connection = connect(cluster.nodes[0], keys)
    connection.cursor().execute(
        "CREATE OR REPLACE FUNCTION django_snowflake_id() RETURNS BIGINT NOT DETERMINISTIC NO SQL "
        f"COMMENT 'django_snowflake layout={LAYOUT.fingerprint} galera=unsupported' "
        "BEGIN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no Snowflake database function'; "
        "RETURN NULL; END"
    )
    connection.close()
    done = migrate(cluster.nodes[0], keys, path=TRIGGER)
    assert done.returncode == 0, done.stderr[-2000:]
    drawn, _ = on_every_node(cluster.nodes, keys, 100)
    slots = node_slots(cluster.nodes[0], keys)
    for name, values in drawn.items():
        assert {LAYOUT.decompose(value).worker_id for value in values} == {slots[name]}


@pytest.mark.parametrize("path", [TRIGGER, "default"])
def test_two_nodes_of_one_name_stop_migrate(cluster: galera.Galera, path: str) -> None:
    """Each node's keys are named after its node, on both paths: two nodes of one name would
    draw the same sequences under the same slot, so ``migrate`` stops, saying why."""
    n2, database = cluster.nodes[1], f"galera_names_{path}"
    n2.sql("SET GLOBAL wsrep_node_name = 'node1'")
    try:
        cluster.nodes[0].sql(f"CREATE DATABASE {database}")
        done = migrate(cluster.nodes[0], database, path=path)
    finally:
        n2.sql("SET GLOBAL wsrep_node_name = 'node2'")
    assert done.returncode != 0
    assert "Two nodes of the Galera cluster are named 'node1'" in done.stderr, done.stderr[-2000:]


def test_a_cluster_bootstrapped_anew_is_a_failover(
    cluster: galera.Galera, workers: list[Process], tmp_path: Path
) -> None:
    """Every node crashes and the cluster is bootstrapped again from node 1, which recovers
    no position: Galera starts a new history (another state UUID), and a claim skips a lease
    and a quarter as after any failover. (The last test: it replaces the module's cluster.)"""
    before = cluster.nodes[0].status("wsrep_cluster_state_uuid")
    go = tmp_path / "go"
    (holder,) = start(workers, tmp_path, {"node1-before": cluster.nodes[0]}, go, lease=3)
    go.touch()
    holder.wait("first")
    time.sleep(0.5)
    for node in cluster.nodes:
        node.kill()
    holder.kill()
    first = cluster.nodes[0]
    grastate = first.data / "grastate.dat"
    grastate.write_text(
        grastate.read_text().replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1")
    )
    first.start(bootstrap=True)
    bootstrapped = time.time() * 1000
    after = first.status("wsrep_cluster_state_uuid")
    assert after != before
    go_after = tmp_path / "go_after"
    (newcomer,) = start(workers, tmp_path, {"node1-after": first}, go_after, lease=3)
    go_after.touch()
    issued = int(newcomer.wait("first", timeout=20)[1])
    issued_after = (issued - bootstrapped) / 1000
    ids = {"before": read_ids(holder.out), "after": newcomer.finish()}
    lead = (min(map(unit_ms, ids["after"])) - issued) / 1000
    summary(f"bootstrapped anew (state UUID {before[:8]} -> {after[:8]}): the claim issued "
            f"{issued_after:.1f} s after, its first key {lead:.1f} s ahead of the clock", ids, {})  # fmt: skip
    assert max(map(unit_ms, ids["before"])) < min(map(unit_ms, ids["after"]))
    # FAILOVER = "skip": at once, above anything a holder of the old history could issue,
    # 1.25 leases past the new history's first sighting, which came after the bootstrap.
    assert min(map(unit_ms, ids["after"])) >= bootstrapped + 3 * 1250 - 100
    assert issued_after < 10
