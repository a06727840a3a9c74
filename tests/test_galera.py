"""A MariaDB Galera cluster as the coordination database (docs: "High-availability databases").

A real 3-node cluster (``harness/galera.py``) started once for the module on private loopback
ports, and real processes (``python -m tests.ha_servers``) issuing IDs through its nodes:
a claim storm over the three nodes, a takeover across nodes that meets a certification
conflict, ``kill -9`` of a node and its rejoin, processes behind a round-robin proxy,
``migrate`` and the database function on every node at once, and a cluster bootstrapped anew.
Every scenario checks 0 duplicate IDs, 0 slots held by two processes at once, and that a
process issues within a second of starting (outside a real failover).

Run under ``SNOWFLAKE_TEST_DB=mariadb`` (``-m galera`` selects them). Without galera-4 they
skip, except under ``CI``, where they fail. ``SNOWFLAKE_GALERA_SECONDS`` sets how long each
scenario issues (default 3 s: the short form, about two minutes with the cluster's start).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_snowflake.layout import BitLayout
from harness import galera
from harness.processes import read_ids

from .ha_servers import ROOT, Router
from .test_failover import Worker

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")
LAYOUT = BitLayout.preset("twitter")
SECONDS = float(os.environ.get("SNOWFLAKE_GALERA_SECONDS", "3"))
DATABASE = "galera"
TABLE = "django_snowflake_workernode"
MISSING = galera.missing()

pytestmark = [
    pytest.mark.galera,
    pytest.mark.skipif(
        VENDOR != "mariadb", reason="the Galera tests run under SNOWFLAKE_TEST_DB=mariadb"
    ),
    pytest.mark.skipif(
        bool(MISSING) and not os.environ.get("CI"), reason=f"no Galera here: {MISSING} missing"
    ),
]


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[galera.Galera]:
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


#: The configuration of the pytest run, whose terminal the measurements go to.
REPORTER: list[pytest.Config] = []


def report(line: str) -> None:
    """A measurement, printed past pytest's capture (``-s`` not needed)."""
    for config in REPORTER:
        plugins = config.pluginmanager
        with plugins.getplugin("capturemanager").global_and_fixture_disabled():
            plugins.getplugin("terminalreporter").write_line(f"[galera] {line}")


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
def processes() -> Iterator[list[Process]]:
    """The processes a test starts, killed at its end if still running."""
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


@pytest.fixture
def proxy(cluster: galera.Galera) -> Iterator[RoundRobin]:
    balancer = RoundRobin(cluster.nodes)
    yield balancer
    balancer.close()


Server = galera.Node | RoundRobin


def start(
    processes: list[Process], tmp_path: Path, servers: dict[str, Server], go: Path, lease: int = 60
) -> list[Process]:
    """One process per name in ``servers``, each set up and waiting for ``go``."""
    new = [Process(tmp_path, name, server, go, lease) for name, server in servers.items()]
    processes.extend(new)
    for worker in new:
        worker.wait("ready")
    return new


def go_and_time(processes: list[Process], go: Path) -> dict[str, float]:
    """Fire the starting gun; each process's time from it to its first ID, in seconds."""
    fired = time.time() * 1000
    go.touch()
    return {worker.name: (int(worker.wait("first")[1]) - fired) / 1000 for worker in processes}


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
    code = "from django_snowflake.allocators.database import _incarnation as i; print(i('default'))"
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
    cluster: galera.Galera, processes: list[Process], tmp_path: Path
) -> None:
    """Processes through every node claim at once with the default lease. Before: the first
    node to write held the table's incarnation, and a claim through another node waited as
    after a failover (75 s)."""
    go = tmp_path / "go"
    per_node = int(os.environ.get("SNOWFLAKE_GALERA_PROCESSES", "3"))
    servers: dict[str, Server] = {
        f"node{node.number}-{n}": node for node in cluster.nodes for n in range(per_node)
    }
    storm = start(processes, tmp_path, servers, go)
    firsts = go_and_time(storm, go)
    time.sleep(SECONDS)
    ids = {worker.name: worker.finish() for worker in storm}
    summary(f"claim storm, {len(storm)} processes", ids, firsts)
    assert max(firsts.values()) < first_id_bound(), firsts
    assert not [worker.stopped() for worker in storm if worker.stopped()]


def test_processes_behind_a_round_robin_proxy(
    proxy: RoundRobin, processes: list[Process], tmp_path: Path
) -> None:
    """Each claim and renewal (every second: a 3 s lease) opens a connection, which the proxy
    gives to the next node; a second wave of processes starts after the first has renewed
    through every node. Before: each node was an incarnation of its own, so the second wave
    met rows of other incarnations and waited as after a failover."""
    go, again = tmp_path / "go", tmp_path / "again"
    first = start(processes, tmp_path, {f"proxy-{n}": proxy for n in range(3)}, go, lease=3)
    firsts = go_and_time(first, go)
    time.sleep(2.5)  # two renewals each, spread over the nodes
    second = start(processes, tmp_path, {f"proxy-{n}": proxy for n in range(3, 6)}, again, lease=3)
    firsts |= go_and_time(second, again)
    time.sleep(max(SECONDS, 3))
    ids = {worker.name: worker.finish() for worker in first + second}
    summary("round-robin proxy, 2 waves of 3 processes, 3 s lease", ids, firsts)
    assert max(firsts.values()) < first_id_bound(), firsts
    assert not [worker.stopped() for worker in first + second if worker.stopped()]


def test_a_takeover_across_nodes_meets_a_certification_conflict(
    cluster: galera.Galera,
    processes: list[Process],
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
    (holder,) = start(processes, tmp_path, {"node1-holder": n1}, go, lease=3)
    go.touch()
    slot = int(holder.wait("first")[2])
    time.sleep(1)
    os.kill(holder.process.pid, signal.SIGSTOP)
    try:
        go_c = tmp_path / "go_c"
        (taker,) = start(processes, tmp_path, {"node2-taker": n2}, go_c, lease=3)
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


def caught_up(node: galera.Node) -> float:
    """Seconds until ``node`` has applied every write the cluster committed."""
    started = time.monotonic()
    node.sql("SET SESSION wsrep_sync_wait = 1; SELECT 1", timeout=120)
    return time.monotonic() - started


def test_kill_9_of_a_node_and_its_rejoin(
    cluster: galera.Galera, proxy: RoundRobin, processes: list[Process], tmp_path: Path
) -> None:
    """Processes through each node and through a proxy; node 3 is killed (kill -9) and
    restarted. The others wait for node 3 until they evict it (``evs.suspect_timeout``, 3 s
    here), so a 3 s lease may run out on any process; all issue again after the eviction,
    and those through node 3 resume once it has rejoined."""
    n3 = cluster.nodes[2]
    go = tmp_path / "go"
    servers: dict[str, Server] = {f"node{node.number}": node for node in cluster.nodes}
    servers |= {f"proxy-{n}": proxy for n in range(2)}
    running = start(processes, tmp_path, servers, go, lease=3)
    firsts = go_and_time(running, go)
    time.sleep(1)
    n3.kill()
    killed = time.monotonic()
    proxy.live.remove(n3.port)
    on_n3 = next(worker for worker in running if worker.name == "node3")
    on_n3.wait("stopped", timeout=15)
    time.sleep(1)
    restarted = time.monotonic()
    n3.start()
    rejoined, rejoin_seconds = time.time() * 1000, time.monotonic() - restarted
    proxy.live.append(n3.port)
    on_n3.wait("resumed", timeout=30)
    resumed = time.monotonic() - killed
    log = n3.log.read_text(errors="replace")
    transfer = "IST" if "IST received" in log else "SST"
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


def test_migrate_and_the_database_function_on_every_node(cluster: galera.Galera) -> None:
    """``migrate`` on the cluster, then the database function drawn on the three nodes at
    once. A sequence drawn on two nodes is neither certified nor serialised (one NOCACHE
    sequence drawn 1,000 times on each node at once: 1,926 duplicates of 3,000), so on a
    Galera node the function refuses every call, clearly, and issues nothing; Django's own
    inserts carry the process's key. Before: ``migrate`` failed (Galera refuses a cached
    sequence), and the function, made of a MyISAM base table and a sequence, looped forever
    on the nodes that did not create it."""
    database = "galera_keys"
    cluster.nodes[0].sql(f"CREATE DATABASE {database}")
    done = migrate(cluster.nodes[0], database)
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes: dict[int, str] = {}

    def draw(node: galera.Node) -> None:
        try:
            outcomes[node.number] = node.sql("SELECT django_snowflake_id();" * 100, database)
        except subprocess.CalledProcessError as exc:
            outcomes[node.number] = exc.stderr

    threads = [threading.Thread(target=draw, args=(node,)) for node in cluster.nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refusal = "no Snowflake database function on a Galera cluster: give the key in the INSERT"
    assert {number: refusal in text for number, text in outcomes.items()} == {
        1: True,
        2: True,
        3: True,
    }
    report("migrate on the cluster: done; the database function refused on all 3 nodes")


def test_a_cluster_bootstrapped_anew_is_a_failover(
    cluster: galera.Galera, processes: list[Process], tmp_path: Path
) -> None:
    """Every node crashes and the cluster is bootstrapped again from node 1, which recovers
    no position: Galera starts a new history (another state UUID), and a claim waits a lease
    as after any failover. (The last test: it replaces the module's cluster.)"""
    before = cluster.nodes[0].status("wsrep_cluster_state_uuid")
    go = tmp_path / "go"
    (holder,) = start(processes, tmp_path, {"node1-before": cluster.nodes[0]}, go, lease=3)
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
    (newcomer,) = start(processes, tmp_path, {"node1-after": first}, go_after, lease=3)
    go_after.touch()
    line = newcomer.wait("stopped")
    assert "failed over or was restored" in " ".join(line), line
    resumed = int(newcomer.wait("resumed", timeout=20)[1])
    waited = (resumed - bootstrapped) / 1000
    ids = {"before": read_ids(holder.out), "after": newcomer.finish()}
    summary(f"bootstrapped anew (state UUID {before[:8]} -> {after[:8]}): the claim "
            f"waited {waited:.1f} s", ids, {})  # fmt: skip
    assert max(map(unit_ms, ids["before"])) < min(map(unit_ms, ids["after"]))
    assert 3 <= waited < 10
