"""A primary and an asynchronous standby on private loopback ports, for the failover tests.

PostgreSQL: ``initdb``, then ``pg_basebackup -R`` for a streaming standby, ``pg_ctl promote``.
MariaDB: two ``mariadbd`` with GTID replication (``MASTER_USE_GTID=slave_pos``); promotion
stops the replica's threads and turns ``read_only`` off.

``python -m tests.ha_servers --out F --stop S`` is a process of those tests: it generates IDs
on the database of its environment until ``S`` exists, appending each to ``F`` as it is
issued, and reports on stdout ``first <ms>`` (the clock when its first ID was issued),
``stopped`` / ``resumed`` around ``WorkerLeaseLost``, and ``done``. With ``--start S`` it
reports ``ready`` once set up and issues its first ID when ``S`` exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.child import report, set_up
from harness.private_server import PrivateServer, Servers, free_port

ROOT = Path(__file__).resolve().parent.parent


class Pair(Servers):
    """A primary and an asynchronous standby of ``vendor``; the standby may be promoted."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.primary = PrivateServer(vendor)
        self.standby = PrivateServer(vendor, initialize=vendor == "mariadb")
        self.router: Router | None = None
        self._start_or_close()

    def _start(self) -> None:
        if self.vendor == "postgresql":
            self.primary.start()
            self.primary._run(
                str(self.primary.bin / "pg_basebackup"), "-h", "127.0.0.1",
                "-p", str(self.primary.port), "-U", "postgres", "-D", str(self.standby.data),
                "-R", "-X", "stream", "-c", "fast",
            )  # fmt: skip
            self.standby.start()
            return
        common = ["--log-bin=binlog", "--binlog-format=ROW", "--log-slave-updates"]
        common.append("--log-bin-trust-function-creators=1")  # migrations may add functions
        self.primary.start("--server-id=1", *common)
        self.standby.start("--server-id=2", "--read-only=ON", *common)
        self.sql(
            self.standby,
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={self.primary.port}, "
            "MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos; START SLAVE",
        )

    def sql(self, server: PrivateServer, statement: str, database: str = "") -> str:
        """Run ``statement`` on ``server``; return its output, tab-separated, no headers."""
        if self.vendor == "postgresql":
            command = ["psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres"]
            command += ["-d", database or "postgres", "-Atqc", statement]
        else:
            command = ["mariadb", "-h127.0.0.1", f"-P{server.port}", "-uroot", "-N", "-B"]
            command += [*([database] if database else []), "-e", statement]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    def catch_up(self, timeout: float = 30) -> None:
        """Wait until the standby has applied everything the primary has written."""
        if self.vendor == "postgresql":
            target = self.sql(self.primary, "SELECT pg_current_wal_lsn()")
            query = f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            done = "t"
        else:
            target = self.sql(self.primary, "SELECT @@gtid_binlog_pos")
            query = f"SELECT MASTER_GTID_WAIT('{target}', 1)"
            done = "0"
        deadline = time.monotonic() + timeout
        while self.sql(self.standby, query) != done:
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not catch up with the primary")
            time.sleep(0.05)

    def detach(self) -> None:
        """Stop the standby receiving: from now on the primary's writes are lost on failover."""
        if self.vendor == "postgresql":
            self.sql(self.standby, "ALTER SYSTEM SET primary_conninfo = ''")
            self.sql(self.standby, "SELECT pg_reload_conf()")
            deadline = time.monotonic() + 10
            while self.sql(self.standby, "SELECT count(*) FROM pg_stat_wal_receiver") != "0":
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby's WAL receiver did not stop")
                time.sleep(0.05)
        else:
            self.sql(self.standby, "STOP SLAVE")

    def promote(self) -> None:
        """Make the standby a primary that accepts writes."""
        if self.vendor == "postgresql":
            self.standby._run(
                str(self.standby.bin / "pg_ctl"), "-D", str(self.standby.data), "-w", "promote"
            )
        else:
            self.sql(self.standby, "STOP SLAVE; SET GLOBAL read_only = OFF")
        if self.router is not None:
            self.router.switch(self.standby.port)

    def routes(self) -> list[PrivateServer | Router]:
        """Where a process that follows the primary connects: both servers on PostgreSQL
        (libpq picks the writable one), a router that ``promote()`` switches on MariaDB."""
        if self.vendor == "postgresql":
            return [self.primary, self.standby]
        if self.router is None:
            self.router = Router(self.primary.port)
        return [self.router]

    def switch_over(self) -> None:
        """A planned switchover: the primary stops cleanly after the standby has all of it."""
        if self.vendor == "postgresql":
            # A clean shutdown sends every WAL record to the connected standbys first.
            self.primary._run(
                str(self.primary.bin / "pg_ctl"), "-D", str(self.primary.data), "-m", "fast",
                "-w", "stop",
            )  # fmt: skip
        else:
            self.sql(self.primary, "SET GLOBAL read_only = ON")
            self.catch_up()
            self.primary.kill()
        self.promote()

    def env(self, *servers: PrivateServer | Router, database: str) -> dict[str, str]:
        """The environment of a test process on ``servers`` (the first writable one)."""
        env = {
            "SNOWFLAKE_TEST_DB": self.vendor,
            "SNOWFLAKE_TEST_DB_HOST": ",".join("127.0.0.1" for _ in servers),
            "SNOWFLAKE_TEST_DB_PORT": ",".join(str(server.port) for server in servers),
            "SNOWFLAKE_TEST_DB_USER": self.primary.user,
            "SNOWFLAKE_TEST_DB_NAME": database,
        }
        if self.vendor == "postgresql":
            # libpq's multi-host connection: the first server that accepts writes.
            env["PGTARGETSESSIONATTRS"] = "read-write"
            env["PGCONNECT_TIMEOUT"] = "2"
        return env

    def close(self) -> None:
        if self.router is not None:
            self.router.close()
        self.standby.close()
        self.primary.close()


class Router:
    """A TCP forwarder on a loopback port to the current primary, as MaxScale or a virtual IP
    would be: ``switch()`` drops every connection and sends new ones to another server."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def switch(self, target: int) -> None:
        with self._lock:
            self.target = target
            for end in self._open:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def close(self) -> None:
        self._listener.close()
        self.switch(self.target)


def _draw_until(
    connect: Callable[[], Any],
    draw: Callable[[Any], list[int]],
    lost: type[BaseException],
    stop: threading.Event,
    sessions: int = 8,
) -> list[int]:
    """Keys ``draw(connection)`` returns on ``sessions`` connections at once, until ``stop`` is
    set or the server is gone (``lost`` raised)."""
    returned: list[list[int]] = [[] for _ in range(sessions)]

    def work(index: int) -> None:
        with contextlib.closing(connect()) as connection:
            while not stop.is_set():
                try:
                    returned[index] += draw(connection)
                except lost:
                    return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [key for keys in returned for key in keys]


def _drawn_during(
    connect: Callable[[], Any],
    draw: Callable[[Any], list[int]],
    lost: type[BaseException],
    during: Callable[[], None],
) -> list[int]:
    """The keys drawn on 8 sessions while ``during()`` runs."""
    stop = threading.Event()
    keys: list[int] = []
    loading = threading.Thread(target=lambda: keys.extend(_draw_until(connect, draw, lost, stop)))
    loading.start()
    during()
    stop.set()
    loading.join()
    return keys


def keys_across_a_crash(
    pair: Pair,
    connect_primary: Callable[[], Any],
    connect_promoted: Callable[[], Any],
    draw: Callable[[Any], list[int]],
    lost: type[BaseException],
) -> tuple[list[int], list[int]]:
    """The database-made keys of an asynchronous failover: load on the primary, the standby
    stops receiving, the primary goes on, then is killed (-9); the standby is promoted and
    loaded for 2 s. Returns the keys the primary returned and those the promoted standby
    issued: a key in both is one a client was told was committed, issued again."""

    def crash() -> None:
        time.sleep(1.5)
        pair.detach()
        time.sleep(1.5)
        pair.primary.kill()

    pair.catch_up()
    returned = _drawn_during(connect_primary, draw, lost, crash)
    pair.promote()
    issued = _drawn_during(connect_promoted, draw, lost, lambda: time.sleep(2))
    return returned, issued


def start_process(
    env: dict[str, str],
    out: Path,
    stop: Path,
    snowflake: dict[str, object],
    start: Path | None = None,
) -> subprocess.Popen[str]:
    """Start ``python -m tests.ha_servers`` on the database of ``env``; it issues its first
    ID once ``start`` exists."""
    env = {
        **os.environ,
        **env,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_SETTINGS": json.dumps(snowflake),
    }
    command = [sys.executable, "-m", "tests.ha_servers", "--out", str(out), "--stop", str(stop)]
    if start is not None:
        command += ["--start", str(start)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def migrate(env: dict[str, str]) -> None:
    env = {**os.environ, **env, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    command = [sys.executable, "-m", "django", "migrate", "django_snowflake", "-v0"]
    subprocess.run(command, cwd=ROOT, env=env, check=True)


def main() -> None:
    args = set_up(start={"help": "wait for this file before the first ID"})
    from django_snowflake import generate, get_generator
    from django_snowflake.exceptions import WorkerLeaseLost

    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    report("ready")
    while args.start and not Path(args.start).exists():
        time.sleep(0.002)
    issuing: bool | None = None
    while not Path(args.stop).exists():
        try:
            value = generate()
        except WorkerLeaseLost as exc:
            if issuing is not False:
                report("stopped", json.dumps(str(exc)))
                issuing = False
            time.sleep(0.02)
            continue
        os.write(fd, array("q", [value]).tobytes())
        if issuing is None:
            report("first", get_generator().now(), get_generator().worker_id)
        elif not issuing:
            report("resumed", get_generator().now(), get_generator().worker_id)
        issuing = True
        time.sleep(0.0005)
    report("done")


if __name__ == "__main__":
    main()
