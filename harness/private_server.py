"""Private PostgreSQL and MariaDB servers for tests that stop and restart a database.

Each lives in its own temporary directory on a free loopback port, so stopping it never
touches the shared servers on 5432 and 3306.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .processes import reap


def _ephemeral_ports() -> range:
    """The ports the kernel hands out as the source of outgoing connections."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return range(32768, 61000)
    return range(low, high + 1)


def free_port() -> int:
    """A loopback port free now, outside the kernel's ephemeral range: a port the kernel
    picked would be free now but could be any outgoing connection's source port by the time
    a server binds it (seen: a Galera node's group port taken by its peers' connection).
    Where that range leaves no room (a machine that gives it nearly every port), the kernel's
    pick."""
    ephemeral = _ephemeral_ports()
    for _ in range(500):
        port = random.randrange(10_000, 65_000)
        if port in ephemeral:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something on ``127.0.0.1:port`` accepts a TCP connection (within a second)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def wait_up(
    process: subprocess.Popen[Any], up: Callable[[], bool], *, timeout: float, every: float
) -> bool:
    """Ask ``up()`` every ``every`` seconds whether the server ``process`` started serves:
    ``True`` once it does, ``False`` once the process has exited or ``timeout`` seconds have
    passed (the caller raises, with what the server's log says)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if up():
            return True
        if process.poll() is not None:
            break
        time.sleep(every)
    return False


class PrivateServer:
    """A database server of ``vendor`` (``postgresql`` or ``mariadb``) that tests may kill."""

    def __init__(self, vendor: str, *, initialize: bool = True) -> None:
        self.vendor = vendor
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"snowflake-{vendor}-"))
        self.data = self.root / "data"
        self.process: subprocess.Popen[bytes] | None = None
        self.options = ["--skip-log-bin"]
        if vendor == "postgresql":
            self.bin = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])
            if os.geteuid() == 0:  # initdb refuses root; the server must own its directory
                shutil.chown(self.root, "postgres")
            if not initialize:  # a standby's data directory comes from pg_basebackup
                return
            self._run(
                str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"
            )
        else:
            self._install_mariadb()

    def _install_mariadb(self) -> None:
        """Write the system tables. The bootstrap server has once failed in CI with no
        output kept; its output now goes into the error, after a second try on a clean
        directory, so a machine's hiccup does not fail a test about keys."""
        command = [
            "mariadb-install-db", "--no-defaults", f"--datadir={self.data}", "--user=root",
            f"--tmpdir={self.root}",
            "--auth-root-authentication-method=normal", "--skip-test-db",
        ]  # fmt: skip
        for attempt in (1, 2):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode == 0:
                return
            shutil.rmtree(self.data, ignore_errors=True)
            if attempt == 2:
                raise RuntimeError(
                    f"mariadb-install-db failed twice (exit {done.returncode}):\n"
                    f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
                )

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True)

    @property
    def user(self) -> str:
        return "postgres" if self.vendor == "postgresql" else "root"

    def start(self, *extra: str) -> None:
        """Start the server; ``extra`` are more ``mariadbd`` options (MariaDB only), kept for
        restarts."""
        if extra:
            self.options = list(extra)
        if self.vendor == "postgresql":
            options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-w",
                "-l", str(self.root / "log"), "start",
            )  # fmt: skip
            return
        self.process = subprocess.Popen(
            # Its own tmpdir: a MariaDB server deletes every #sql file of its tmpdir when it
            # starts, other servers' live temporary tables included (the shared server's too).
            ["mariadbd", "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
             f"--tmpdir={self.root}",
             "--bind-address=127.0.0.1", f"--socket={self.root / 'sock'}", "--user=root",
             "--innodb-buffer-pool-size=16M", *self.options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the private MariaDB on port {self.port} did not start")

    def kill(self) -> None:
        """Stop the server at once, as a crash or a network cut would."""
        if self.vendor == "postgresql":
            self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )
        elif self.process is not None:
            reap([self.process])
            self.process = None

    def create_database(self, name: str) -> None:
        if self.vendor == "postgresql":
            command = ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-c"]
        else:
            command = ["mariadb", "-h127.0.0.1", f"-P{self.port}", "-uroot", "-e"]
        subprocess.run([*command, f"CREATE DATABASE {name}"], check=True, capture_output=True)

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running(vendor: str, database: str) -> Iterator[PrivateServer]:
    """A :class:`PrivateServer` of ``vendor``, started, with an empty ``database``; closed
    (stopped and deleted) after the block."""
    private = PrivateServer(vendor)
    try:
        private.start()
        private.create_database(database)
        yield private
    finally:
        private.close()


class Servers:
    """Servers started together (a cluster, a primary and its standby): whatever a failed
    start left running is closed before the error goes on."""

    def _start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _start_or_close(self) -> None:
        try:
            self._start()
        except BaseException:
            self.close()
            raise


class Cluster(Servers):
    """The servers of one cluster, in one temporary directory (``root``) removed by
    :meth:`close`, under a ``name`` of this process's, so that two runs' clusters never meet."""

    def __init__(self, kind: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"snowflake-{kind}-"))
        self.name = f"snowflake{os.getpid()}"

    def _hand_over(self, user: str) -> None:
        """Give ``root`` and everything in it to ``user``, whom the servers run as when this
        process is root."""
        self.root.chmod(0o755)
        for path in [self.root, *self.root.rglob("*")]:
            shutil.chown(path, user, user)

    def close(self) -> None:
        """Remove ``root``; a subclass stops its servers first."""
        shutil.rmtree(self.root, ignore_errors=True)
