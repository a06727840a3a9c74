"""A private PgBouncer (Debian's ``pgbouncer``) in front of the shared PostgreSQL, for the
pooler tests.

It lives in its own temporary directory on a free loopback port, passes every database name
through to ``127.0.0.1:5432`` (trust auth, as the shared server), and may be stopped and
started again on the same port (a restart), or told ``RECONNECT`` on its admin console.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .private_server import free_port, listening, wait_up
from .processes import reap

BINARY = "/usr/sbin/pgbouncer"


def missing() -> str:
    """What this machine lacks to run PgBouncer; ``""`` when nothing."""
    needs = {"pgbouncer": Path(BINARY).exists(), "psql (admin console)": bool(shutil.which("psql"))}
    return ", ".join(name for name, present in needs.items() if not present)


class PgBouncer:
    """A PgBouncer of ``mode`` (``transaction`` or ``session``), ``pool_size`` server
    connections per database and user, and ``settings`` as more ini lines."""

    def __init__(self, mode: str, *, pool_size: int = 8, **settings: object) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"snowflake-pgbouncer-{mode}-"))
        self.ini = self.root / "pgbouncer.ini"
        self.log = self.root / "pgbouncer.log"
        self.process: subprocess.Popen[bytes] | None = None
        (self.root / "users.txt").write_text('"postgres" ""\n')
        lines = {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": self.root / "users.txt",
            "admin_users": "postgres",
            "pool_mode": mode,
            "default_pool_size": pool_size,
            "max_client_conn": 200,
            "logfile": self.log,
            # A restart finds its port at once, whatever the last one left in TIME_WAIT.
            "so_reuseport": 1,
            **settings,
        }
        body = "\n".join(f"{key} = {value}" for key, value in lines.items())
        self.ini.write_text(f"[databases]\n* = host=127.0.0.1 port=5432\n\n[pgbouncer]\n{body}\n")
        if os.geteuid() == 0:  # PgBouncer refuses root: it runs as postgres, which must write
            shutil.chown(self.root, "postgres")
            for path in self.root.iterdir():
                shutil.chown(path, "postgres")

    def start(self) -> None:
        """Start it (again) on its port; return once it accepts connections."""
        user = ["-u", "postgres"] if os.geteuid() == 0 else []
        self.process = subprocess.Popen(
            [BINARY, *user, str(self.ini)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if not wait_up(self.process, lambda: listening(self.port), timeout=10, every=0.05):
            raise RuntimeError(f"PgBouncer on port {self.port} did not start: {self.log_text()}")

    def stop(self) -> None:
        """Stop it at once (SIGTERM: every client and server connection closed), as a crash
        or a restart by the service manager would."""
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
            self.process = None

    def restart(self, pause: float = 0.0) -> None:
        """Stop it, wait ``pause`` seconds, start it again on the same port."""
        self.stop()
        time.sleep(pause)
        self.start()

    def admin(self, command: str) -> list[dict[str, str]]:
        """Run ``command`` (``RECONNECT``, ``SHOW POOLS``) on the admin console: its rows, by
        column name."""
        done = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d",
             "pgbouncer", "-AF", "\t", "--pset=footer=off", "-c", command],
            check=True, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        header, *rows = [line.split("\t") for line in done.stdout.splitlines()] or [[]]
        return [dict(zip(header, row, strict=True)) for row in rows]

    def pool(self, database: str) -> dict[str, str]:
        """``SHOW POOLS``'s row of ``database``: ``cl_active``, ``cl_waiting``, ``sv_active``,
        ``sv_idle``, ``maxwait`` and the others (empty before its first client)."""
        rows = [row for row in self.admin("SHOW POOLS") if row.get("database") == database]
        return rows[0] if rows else {}

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else "(no log)"

    def close(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.stop()
        if self.process is not None:
            reap([self.process])
        shutil.rmtree(self.root, ignore_errors=True)
