"""A private 3-node Patroni cluster (Debian's ``patroni``) with its own etcd, and HAProxy in
front of it with Patroni's REST health check, for tests/test_patroni.py.

Every process lives in one temporary directory on free loopback ports: one ``etcd`` (the DCS,
its v3 API), three ``patroni`` each running a PostgreSQL (``pg_config --bindir``) with
asynchronous streaming replication, ``use_pg_rewind`` and ``wal_log_hints``, and one
``haproxy`` that sends connections to the node whose ``GET /primary`` answers 200, as
Patroni's documentation sets it up. As root, Patroni and so PostgreSQL run as ``postgres``.

The helpers are what an operator or a crash does: a ``patronictl switchover``; an unplanned
failover that loses acknowledged writes (the leader's WAL senders stopped, so the standbys
receive nothing more, then the whole leader node killed with ``kill -9``); the wait for the
new leader; and the old leader's rejoin, which Patroni does by ``pg_rewind``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .private_server import Cluster, free_port, wait_up
from .processes import reap

#: The leader key's time to live (s): how long after the leader died a standby takes over.
#: Patroni wants ``loop_wait + 2 * retry_timeout <= ttl``.
TTL, LOOP_WAIT, RETRY_TIMEOUT = 10, 1, 3
#: As root, Patroni (and the PostgreSQL it starts) runs as this user: initdb refuses root.
USER = "postgres" if os.geteuid() == 0 else None


def bin_dir() -> Path | None:
    """PostgreSQL's binaries (``pg_config --bindir``), or ``None`` without pg_config."""
    if not shutil.which("pg_config"):
        return None
    done = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def missing() -> str:
    """What this machine lacks to run the cluster; ``""`` when nothing."""
    binaries = bin_dir()
    needs = {
        "patroni": shutil.which("patroni") is not None,
        "patronictl": shutil.which("patronictl") is not None,
        "etcd-server (etcd)": shutil.which("etcd") is not None,
        "haproxy": shutil.which("haproxy") is not None,
        "PostgreSQL (pg_config --bindir)": binaries is not None
        and (binaries / "pg_rewind").exists(),
        "psql": shutil.which("psql") is not None,
    }
    return ", ".join(name for name, present in needs.items() if not present)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a postmaster's backends and WAL senders)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The field after the command's closing parenthesis: state, then the parent.
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _kill(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class Node:
    """One Patroni member and its PostgreSQL; ``kill()`` is the node's power cut,
    ``start()`` (re)starts its Patroni, which rejoins the cluster (by ``pg_rewind`` after a
    failover)."""

    def __init__(self, cluster: Patroni, number: int) -> None:
        self.cluster = cluster
        self.name = f"pg{number}"
        self.port = free_port()
        self.api = free_port()
        self.root = cluster.root / self.name
        self.data = self.root / "data"
        self.config = self.root / "patroni.yml"
        self.log = self.root / "patroni.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0  # where the log of the last start begins

    def write_config(self) -> None:
        """Patroni's YAML (written as JSON, which YAML reads)."""
        address = "127.0.0.1"
        bootstrap_parameters = {
            "wal_log_hints": "on",  # pg_rewind needs it (or data checksums)
            "wal_keep_size": "256MB",
            "max_wal_senders": 10,
            "max_replication_slots": 10,
            "fsync": "off",  # test data: a crash of the machine loses nothing we keep
        }
        config: dict[str, Any] = {
            "scope": self.cluster.name,
            "namespace": "/service/",
            "name": self.name,
            "restapi": {
                "listen": f"{address}:{self.api}",
                "connect_address": f"{address}:{self.api}",
            },
            "etcd3": {"hosts": f"{address}:{self.cluster.etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL,
                    "loop_wait": LOOP_WAIT,
                    "retry_timeout": RETRY_TIMEOUT,
                    # Asynchronous replication, as Patroni's default; a standby behind the
                    # lost writes must still be allowed to take over.
                    "maximum_lag_on_failover": 1 << 30,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": bootstrap_parameters,
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": f"{address}:{self.port}",
                "connect_address": f"{address}:{self.port}",
                "data_dir": str(self.data),
                "bin_dir": str(self.cluster.bin_dir),
                "pgpass": str(self.root / "pgpass"),
                "authentication": {
                    role: {"username": "postgres"}
                    for role in ("superuser", "replication", "rewind")
                },
                "parameters": {"unix_socket_directories": str(self.root)},
                "pg_hba": [
                    "local all all trust",
                    f"host all all {address}/32 trust",
                    f"host replication all {address}/32 trust",
                ],
            },
        }
        self.config.write_text(json.dumps(config, indent=1))

    def start(self) -> None:
        """Start this node's Patroni (it starts, or rewinds and starts, its PostgreSQL)."""
        self.started_at = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                ["patroni", str(self.config)], stdout=log, stderr=subprocess.STDOUT,
                cwd=self.root, user=USER, env={**os.environ, "HOME": str(self.root)},
            )  # fmt: skip

    def postmaster(self) -> int | None:
        """The pid of this node's postmaster, while its data directory says one runs."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            if Path(f"/proc/{pid}").exists():
                return pid
        return None

    def kill(self) -> None:
        """``kill -9`` of the whole node: Patroni, the postmaster and every child of it
        (Patroni starts PostgreSQL detached, so it outlives a killed Patroni otherwise)."""
        if self.process is not None:
            reap([self.process])
            self.process = None
        postmaster = self.postmaster()
        if postmaster is None:
            return
        children = _children(postmaster)
        for pid in [postmaster, *children]:
            _kill(pid)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in [postmaster, *children]):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: PostgreSQL survived kill -9")
            time.sleep(0.02)

    def status(self, path: str = "patroni", timeout: float = 1) -> tuple[int, dict[str, Any]]:
        """Patroni's REST answer to ``GET /path``: its HTTP status and JSON (0 when down)."""
        url = f"http://127.0.0.1:{self.api}/{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                return int(answer.status), json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            with contextlib.suppress(ValueError):
                return int(error.code), json.loads(error.read() or b"{}")
            return int(error.code), {}
        except (OSError, ValueError):
            return 0, {}

    def sql(self, statement: str, database: str = "postgres", timeout: float = 10) -> str:
        """Run ``statement`` on this node's PostgreSQL: its output, unaligned, no headers."""
        done = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
             "-Atqc", statement],
            check=True, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return done.stdout.strip()

    def rewound(self) -> bool:
        """Whether this node's Patroni ran ``pg_rewind`` successfully since its last start."""
        with open(self.log, "rb") as log:
            log.seek(self.started_at)
            return b"pg_rewind exit code=0" in log.read()

    def tail(self, lines: int = 20) -> str:
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class HAProxy:
    """HAProxy on a free port in front of ``nodes``, checking each Patroni's ``/primary``
    every second, a node down after 2 failed checks and up after 1 passed, its sessions shut
    down once it is down (Patroni's documented setup, with the short intervals that a
    10-second lease needs)."""

    def __init__(self, root: Path, nodes: list[Node]) -> None:
        self.port = free_port()
        self.config = root / "haproxy.cfg"
        self.log = root / "haproxy.log"
        servers = "\n".join(
            f"    server {node.name} 127.0.0.1:{node.port} maxconn 100 check port {node.api}"
            for node in nodes
        )
        self.config.write_text(
            "global\n    maxconn 400\n\n"
            "defaults\n    mode tcp\n    retries 2\n    timeout connect 2s\n"
            "    timeout client 30m\n    timeout server 30m\n    timeout check 2s\n\n"
            f"listen postgres_primary\n    bind 127.0.0.1:{self.port}\n"
            "    option httpchk GET /primary\n    http-check expect status 200\n"
            "    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions\n"
            f"{servers}\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                ["haproxy", "-db", "-f", str(self.config)], stdout=log, stderr=subprocess.STDOUT
            )

    def close(self) -> None:
        if self.process is not None:
            reap([self.process])
            self.process = None


class Patroni(Cluster):
    """etcd, three Patroni nodes (``pg1`` bootstraps the cluster) and HAProxy; the cluster's
    ``name`` is Patroni's scope."""

    def __init__(self, size: int = 3) -> None:
        binaries = bin_dir()
        if binaries is None:
            raise RuntimeError("no pg_config: PostgreSQL's binaries are not installed")
        super().__init__("patroni")
        self.bin_dir = binaries
        self.etcd_port, self.etcd_peer = free_port(), free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.nodes = [Node(self, number) for number in range(1, size + 1)]
        self.haproxy = HAProxy(self.root, self.nodes)
        self._start_or_close()

    def _start(self) -> None:
        self._start_etcd()
        for node in self.nodes:
            node.root.mkdir(mode=0o700)
            node.write_config()
        if USER:
            self._hand_over(USER)
        self.nodes[0].start()
        self.wait_for_leader(timeout=60)
        for node in self.nodes[1:]:
            node.start()
        self.wait_replicating(timeout=60)
        self.haproxy.start()
        self.wait_routed(self.leader())

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        with open(self.root / "etcd.log", "ab") as log:
            self.etcd = subprocess.Popen(
                ["etcd", "--name", "etcd1", "--data-dir", str(self.root / "etcd"),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"etcd1={peer}", "--initial-cluster-state", "new",
                 "--initial-cluster-token", self.name],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

        def healthy() -> bool:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"{client}/health", timeout=1) as answer,
            ):
                return bool(json.loads(answer.read()).get("health") == "true")
            return False

        if not wait_up(self.etcd, healthy, timeout=30, every=0.1):
            log = (self.root / "etcd.log").read_text()[-2000:]
            raise RuntimeError(f"etcd did not start: {log}")

    def leader(self) -> Node:
        """The node whose Patroni answers 200 to ``/primary`` (PostgreSQL primary, leader
        lock held); raises ``LookupError`` when none does."""
        for node in self.nodes:
            if node.process is not None and node.status("primary")[0] == 200:
                return node
        raise LookupError("no node answers 200 to /primary")

    def wait_for_leader(self, other_than: Node | None = None, timeout: float = 60) -> Node:
        """Wait (polling every 50 ms) until a node other than ``other_than`` is the leader
        and takes writes; return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(LookupError):
                leader = self.leader()
                if leader is not other_than:
                    return leader
            time.sleep(0.05)
        tails = "\n".join(f"--- {node.name}\n{node.tail()}" for node in self.nodes)
        raise RuntimeError(f"no new leader in {timeout} s:\n{tails}")

    def wait_streaming(self, node: Node, timeout: float = 60) -> None:
        """Wait until ``node`` runs as a replica streaming from the leader, on its timeline."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, state = node.status("patroni")
            with contextlib.suppress(LookupError):
                timeline = self.leader().status("patroni")[1].get("timeline")
                if (
                    status == 200
                    and state.get("role") == "replica"
                    and state.get("state") == "running"
                    and state.get("timeline") == timeline
                    and node.sql("SELECT count(*) FROM pg_stat_wal_receiver") == "1"
                ):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{node.name} does not stream from the leader: {node.tail()}")

    def wait_replicating(self, timeout: float = 60) -> None:
        """Wait until every node but the leader streams from it."""
        deadline = time.monotonic() + timeout
        leader = self.wait_for_leader(timeout=timeout)
        for node in self.nodes:
            if node is not leader:
                self.wait_streaming(node, timeout=max(1.0, deadline - time.monotonic()))
        query = "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
        while leader.sql(query) != str(len(self.nodes) - 1):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{leader.name} does not stream to every standby")
            time.sleep(0.1)

    def wait_routed(self, leader: Node, timeout: float = 30) -> None:
        """Wait until HAProxy sends a new connection to ``leader``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.SubprocessError):
                port = self.via_haproxy("SELECT inet_server_port()", timeout=2)
                if port == str(leader.port):
                    return
            time.sleep(0.1)
        raise RuntimeError(f"HAProxy does not route to {leader.name}: {self.haproxy.log}")

    def via_haproxy(self, statement: str, timeout: float = 10) -> str:
        done = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.haproxy.port), "-U", "postgres",
             "-d", "postgres", "-Atqc", statement],
            check=True, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return done.stdout.strip()

    def switchover(self, candidate: Node) -> None:
        """``patronictl switchover --force`` from the leader to ``candidate``."""
        leader = self.leader()
        done = subprocess.run(
            ["patronictl", "-c", str(leader.config), "switchover", "--leader", leader.name,
             "--candidate", candidate.name, "--force"],
            capture_output=True, text=True, timeout=60, user=USER,
            env={**os.environ, "HOME": str(leader.root)},
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"patronictl switchover failed: {done.stdout}{done.stderr}")

    def hold_replication(self) -> Node:
        """Stop the leader's WAL senders (SIGSTOP): from now on its commits reach no standby,
        as a network cut between them would; returns the leader."""
        leader = self.leader()
        senders = leader.sql("SELECT pid FROM pg_stat_replication").split()
        if len(senders) != len(self.nodes) - 1:
            raise RuntimeError(f"{leader.name} streams to {len(senders)} standbys, not 2")
        for pid in senders:
            _kill(int(pid), signal.SIGSTOP)
        return leader

    def close(self) -> None:
        self.haproxy.close()
        for node in self.nodes:
            node.kill()
        if self.etcd is not None:
            reap([self.etcd])
            self.etcd = None
        super().close()
