"""A private 3-node MariaDB Galera cluster on loopback ports, for the Galera tests.

Node 1 bootstraps the cluster (``--wsrep-new-cluster``); nodes 2 and 3 join it and take a
state snapshot (SST) by rsync. Every node has its own temporary directory and its own free
ports (SQL, group communication, IST, SST), so nothing touches the shared servers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from .private_server import Cluster, free_port
from .processes import reap

#: As root, the servers run as ``mysql``: a root server's rsync state transfer starts an
#: rsync daemon as root, which writes as ``nobody`` and cannot fill the joiner's directory.
USER = ["--user=mysql"] if os.geteuid() == 0 else []

#: The status of a node that has all of the cluster's writes and takes queries.
SYNCED = {"wsrep_local_state_comment": "Synced", "wsrep_ready": "ON"}

#: Where Debian's galera-4 installs the provider.
PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")


def missing() -> str:
    """What this machine lacks to run a Galera cluster; ``""`` when nothing."""
    needs = {
        "galera-4 (libgalera_smm.so)": PROVIDER.exists(),
        "mariadbd": shutil.which("mariadbd") is not None,
        "rsync (state transfer)": shutil.which("rsync") is not None,
        "wsrep_sst_rsync": shutil.which("wsrep_sst_rsync") is not None,
    }
    return ", ".join(name for name, present in needs.items() if not present)


class Node:
    """One ``mariadbd`` of the cluster; ``kill()`` is a crash, ``start()`` (re)joins."""

    def __init__(self, cluster: Galera, number: int) -> None:
        self.cluster = cluster
        self.number = number
        self.name = f"node{number}"
        self.port = free_port()
        self.gcomm = free_port()
        self.ist = free_port()
        self.sst = free_port()
        self.root = cluster.root / self.name
        self.data = self.root / "data"
        self.log = self.root / "error.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcomm}"

    def start(self, *, bootstrap: bool = False, wait: bool = True, incoming: str = "") -> None:
        """Start the node; ``incoming`` is the address it tells the cluster clients reach it
        at (``wsrep_incoming_addresses``), by default its own."""
        peers = "" if bootstrap else ",".join(node.address for node in self.cluster.nodes)
        provider_options = (
            f"gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm}; ist.recv_addr=127.0.0.1:{self.ist}; "
            "gcache.size=64M; evs.suspect_timeout=PT3S; evs.inactive_timeout=PT6S; "
            "evs.install_timeout=PT6S; pc.wait_prim_timeout=PT10S"
        )
        command = [
            "mariadbd", "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
            "--bind-address=127.0.0.1", f"--socket={self.root / 'sock'}", *USER,
            f"--tmpdir={self.root}",  # a server deletes every #sql file of its tmpdir at start
            f"--log-error={self.log}", "--innodb-buffer-pool-size=16M", "--skip-log-bin",
            "--innodb-flush-log-at-trx-commit=2", "--innodb-autoinc-lock-mode=2",
            "--binlog-format=ROW", "--default-storage-engine=InnoDB",
            "--log-bin-trust-function-creators=1", "--max-connections=500",
            "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}",
            f"--wsrep-cluster-name={self.cluster.name}", f"--wsrep-node-name={self.name}",
            f"--wsrep-cluster-address=gcomm://{peers}",
            f"--wsrep-node-address=127.0.0.1:{self.gcomm}",
            f"--wsrep-node-incoming-address={incoming or f'127.0.0.1:{self.port}'}",
            f"--wsrep-sst-receive-address=127.0.0.1:{self.sst}",
            "--wsrep-sst-method=rsync", f"--wsrep-provider-options={provider_options}",
            *(["--wsrep-new-cluster"] if bootstrap else []),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root
        )
        if not wait:
            return
        try:
            self.wait_synced()
        except RuntimeError:
            # A joiner that found no primary component within pc.wait_prim_timeout exits
            # (seen in CI on a loaded machine, two clusters at once: "view((empty))",
            # "SELF-LEAVE"); it is started once more, then the error stands.
            if bootstrap or self.process.poll() is None:
                raise
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root
            )
            self.wait_synced()

    def wait_synced(self, timeout: float = 90) -> None:
        """Wait until the node is Synced with the cluster and takes queries."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"Galera {self.name} exited: {self.tail()}")
            with contextlib.suppress(subprocess.CalledProcessError):
                state = self.sql(
                    "SHOW GLOBAL STATUS WHERE Variable_name IN "
                    "('wsrep_ready', 'wsrep_local_state_comment')",
                    timeout=2,
                )
                if dict(line.split("\t") for line in state.splitlines()) == SYNCED:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"Galera {self.name} did not sync in {timeout} s: {self.tail()}")

    def tail(self, lines: int = 15) -> str:
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def sql(self, statement: str, database: str = "", timeout: float = 30) -> str:
        """Run ``statement`` on this node; its output, tab-separated, no headers."""
        command = ["mariadb", "-h127.0.0.1", f"-P{self.port}", "-uroot", "-N", "-B"]
        command += ["--connect-timeout=2", *([database] if database else []), "-e", statement]
        done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)
        return done.stdout.strip()

    def status(self, name: str) -> str:
        return self.sql(f"SHOW GLOBAL STATUS LIKE '{name}'").split("\t")[-1]

    def kill(self) -> None:
        """``kill -9``: the node leaves the cluster as a crash or a network cut would."""
        if self.process is not None:
            reap([self.process])
            self.process = None

    def stop(self) -> None:
        """A clean shutdown (the node leaves the cluster gracefully)."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                reap([self.process])
            self.process = None


class Galera(Cluster):
    """Three nodes of one Galera cluster; ``nodes[0]`` bootstrapped it."""

    def __init__(self, size: int = 3) -> None:
        super().__init__("galera")
        self.nodes = [Node(self, number) for number in range(1, size + 1)]
        self._start_or_close()

    def _start(self) -> None:
        for node in self.nodes:
            node.data.mkdir(parents=True)  # empty but node 1's: the state transfer fills it
        if USER:
            self._hand_over("mysql")
        first = self.nodes[0]
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={first.data}", *USER,
             f"--tmpdir={first.root}",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            check=True, capture_output=True,
        )  # fmt: skip
        first.start(bootstrap=True)
        for node in self.nodes[1:]:
            node.start()

    def size(self) -> int:
        return int(self.nodes[0].status("wsrep_cluster_size"))

    def close(self) -> None:
        for node in self.nodes:
            node.kill()
        super().close()
