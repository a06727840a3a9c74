"""Real servers: the example shop under gunicorn (``--preload``, 4 workers) and uvicorn (ASGI,
4 workers), loaded over loopback HTTP by an asyncio client.

Each request is ``POST /api/orders/`` (HTTP Basic as a shop user), which creates one order
whose key the server's process generates. Afterwards:

* every response is a 201, with no transport error;
* nothing is lost: the database holds exactly the orders the responses returned;
* the created IDs, decoded, carry as many distinct worker IDs as the server has worker
  processes; the ``WorkerNode`` table has one active row per worker process (its
  ``process_id`` is that worker's pid) and none for gunicorn's master, and the admin's
  ``WorkerNode`` changelist, fetched logged in, shows those leases as active;
* after a clean stop, every slot is released.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from .common import (
    ROOT,
    Database,
    forget_database_slot,
    free_port,
    log,
    percentile,
    private_database,
    work_dir,
)

USER, PASSWORD = "stress", "stress-password"
RECONNECT = 20  # requests per keep-alive connection


@dataclasses.dataclass
class ServersConfig:
    requests: int = 55_000  # per server
    concurrency: int = 16
    workers: int = 4
    servers: tuple[str, ...] = ("gunicorn", "uvicorn")

    @classmethod
    def quick(cls) -> ServersConfig:
        return cls(requests=1_500, concurrency=8, workers=2)


def example_env(db: Database) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "stress.example_settings",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'example_project'}",
        "STRESS_DB_VENDOR": db.vendor,
        "STRESS_DB_NAME": db.name,
    }
    if db.vendor != "sqlite":
        env.update(STRESS_DB_HOST=db.host, STRESS_DB_PORT=db.port, STRESS_DB_USER=db.user)
    return env


SETUP = f"""
from django.contrib.auth.models import User
from shop.models import Customer
User.objects.create_superuser({USER!r}, "stress@example.com", {PASSWORD!r})
print(Customer.objects.create(name="Load", email="load@example.com").pk)
"""

NODES = """
import json
from django.utils import timezone
from django_snowflake.models import WorkerNode
now = timezone.now()
print(json.dumps([
    {"worker_id": n.worker_id, "process_id": n.process_id, "label": n.label,
     "active": n.released_at is None and n.lease_expires_at > now,
     "released": n.released_at is not None}
    for n in WorkerNode.objects.all()
]))
"""

ORDERS = """
import sys
from shop.models import Order
sys.stdout.write("\\n".join(str(pk) for pk in Order.objects.values_list("pk", flat=True)))
"""


def django_python(env: dict[str, str], code: str) -> str:
    command = [sys.executable, "-m", "django", "shell", "-v0", "-c", code]
    return subprocess.run(
        command, cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=300
    ).stdout


# The load generator.


@dataclasses.dataclass
class Load:
    statuses: Counter[int] = dataclasses.field(default_factory=Counter)
    transport_errors: Counter[str] = dataclasses.field(default_factory=Counter)
    ids: list[int] = dataclasses.field(default_factory=list)
    latencies: list[float] = dataclasses.field(default_factory=list)
    non_2xx_examples: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:
        body = await reader.read()
    return status, headers, body


async def _client(port: int, body: bytes, auth: str, budget: list[int], load: Load) -> None:
    request = (
        f"POST /api/orders/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic {auth}"
        f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    reader = writer = None
    served = 0
    while budget[0] > 0:
        budget[0] -= 1
        served += 1
        started = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert reader is not None
            writer.write(request)
            status, headers, payload = await asyncio.wait_for(_read_response(reader), 60)
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            load.transport_errors[type(exc).__name__] += 1
            if writer is not None:
                writer.close()
            reader = writer = None
            continue
        load.latencies.append(time.perf_counter() - started)
        load.statuses[status] += 1
        if status == 201:
            load.ids.append(int(json.loads(payload)["id"]))
        elif len(load.non_2xx_examples) < 5:
            load.non_2xx_examples.append(f"{status}: {payload[:300]!r}")
        # A new connection now and then, so that the kernel spreads them over the workers.
        if headers.get("connection", "").lower() == "close" or served % RECONNECT == 0:
            assert writer is not None
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


def generate_load(
    port: int, customer: int, requests: int, concurrency: int, timeout: float = 3600
) -> Load:
    """``requests`` order creations over ``concurrency`` keep-alive connections.

    Requests still unsent after ``timeout`` seconds are counted as the transport error
    ``deadline``: a stuck server fails the run instead of hanging it.
    """
    body = json.dumps({"customer": str(customer), "status": "pending"}).encode()
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    load = Load()
    budget = [requests]

    async def main() -> None:
        await asyncio.gather(*(_client(port, body, auth, budget, load) for _ in range(concurrency)))

    started = time.perf_counter()
    asyncio.run(main())
    load.seconds = time.perf_counter() - started
    return load


# The servers.


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def server_command(kind: str, port: int, workers: int) -> list[str]:
    if kind == "gunicorn":
        return [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--preload",
            "--workers",
            str(workers),
            "--bind",
            f"127.0.0.1:{port}",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ]
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "stress.example_asgi:application",
        "--workers",
        str(workers),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
    ]


def worker_pids(master: int) -> set[int]:
    """The server's worker processes: the children of its master that run Python."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    pids = set()
    for child in map(int, children):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"multiprocessing.resource_tracker" not in cmdline:
                pids.add(child)
    return pids


def admin_changelist(port: int) -> str:
    """The WorkerNode changelist of active leases, as a logged-in admin sees it."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{port}"
    login = opener.open(f"{base}/admin/login/", timeout=30).read().decode()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login)
    assert match, "no CSRF token on the admin login page"
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": match[1], "username": USER, "password": PASSWORD, "next": "/admin/"}
    ).encode()
    request = urllib.request.Request(
        f"{base}/admin/login/", data=form, headers={"Referer": f"{base}/admin/login/"}
    )
    opener.open(request, timeout=30).read()
    url = f"{base}/admin/django_snowflake/workernode/?lease=active"
    return str(opener.open(url, timeout=30).read().decode())


def run_server(kind: str, db: Database, customer: int, config: ServersConfig) -> dict[str, Any]:
    env = example_env(db)
    port = free_port()
    before = {int(v) for v in django_python(env, ORDERS).split()}
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"stress-{kind}-{port}.log"
    with open(log_path, "wb") as err:
        server = subprocess.Popen(
            server_command(kind, port, config.workers),
            cwd=ROOT,
            env={**env, "STRESS_CONN_MAX_AGE": "60" if kind == "gunicorn" else "0"},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_for_port(port, server)
        load = generate_load(
            port, customer, config.requests, config.concurrency, 120 + config.requests / 5
        )
        pids = worker_pids(server.pid)
        nodes = json.loads(django_python(env, NODES))
        page = admin_changelist(port)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    after_stop = json.loads(django_python(env, NODES))
    stored = {int(v) for v in django_python(env, ORDERS).split()} - before

    from django_snowflake.layout import BitLayout

    layout = BitLayout.preset("twitter")
    workers_of_ids = Counter(layout.decompose(value).worker_id for value in load.ids)
    active = [n for n in nodes if n["active"]]
    active_workers = {n["worker_id"] for n in active}
    shown = set(map(int, re.findall(r'class="field-worker_id">(?:<a [^>]*>)?(\d+)<', page)))
    shown_active = len(re.findall(r'class="field-lease">active<', page, re.IGNORECASE))
    created = set(load.ids)
    latencies = sorted(load.latencies)
    ok = sum(n for status, n in load.statuses.items() if 200 <= status < 300)
    result = {
        "server": kind,
        "requests": config.requests,
        "concurrency": config.concurrency,
        "created": ok,
        "non_2xx": sum(n for status, n in load.statuses.items() if not 200 <= status < 300),
        "statuses": dict(load.statuses),
        "non_2xx_examples": load.non_2xx_examples,
        "transport_errors": dict(load.transport_errors),
        "requests_per_second": round(config.requests / load.seconds),
        "latency_ms_p50_p99": [round(percentile(latencies, q) * 1000, 1) for q in (0.5, 0.99)],
        "duplicate_ids": len(load.ids) - len(created),
        "stored_orders": len(stored),
        "lost": len(created - stored),
        "unexpected_rows": len(stored - created),
        "worker_processes": len(pids),
        "worker_ids_in_created_ids": dict(sorted(workers_of_ids.items())),
        "active_leases": len(active),
        "active_lease_pids_are_workers": {n["process_id"] for n in active} == pids,
        "master_holds_a_slot": any(n["process_id"] == server.pid for n in active),
        "admin_shows_active_workers": sorted(shown),
        "admin_active_rows": shown_active,
        # Of the slots the workers held, how many were released when the server stopped.
        "released_after_stop": sum(
            1 for n in after_stop if n["released"] and n["worker_id"] in active_workers
        ),
    }
    result["passed"] = (
        ok == config.requests
        and result["non_2xx"] == 0
        and not load.transport_errors
        and result["duplicate_ids"] == 0
        and result["lost"] == 0
        and result["unexpected_rows"] == 0
        and len(workers_of_ids) == len(pids) == config.workers
        and set(workers_of_ids) == active_workers
        and len(active) == len(pids)
        and result["active_lease_pids_are_workers"]
        and not result["master_holds_a_slot"]
        and shown == active_workers
        and shown_active == len(active)
        # uvicorn ends its workers by re-raising SIGTERM after its graceful shutdown, so no
        # atexit handler runs and their slots expire instead of being released.
        and (kind == "uvicorn" or result["released_after_stop"] == len(active))
    )
    if not result["passed"]:
        result["server_log_tail"] = log_path.read_text(errors="replace")[-3000:]
    else:
        log_path.unlink()
    return result


def run_servers(vendor: str, config: ServersConfig) -> dict[str, Any]:
    """Run every server of ``config`` on a throwaway database of ``vendor``."""
    with (
        work_dir(prefix="snowflake-servers-") as root,
        private_database(vendor, root, max_connections=300) as db,
    ):
        env = example_env(db)
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        forget_database_slot(env)
        customer = int(django_python(env, SETUP).strip())
        runs = []
        for kind in config.servers:
            log(f"servers {vendor}: {kind}, {config.requests:,} requests")
            runs.append(run_server(kind, db, customer, config))
        return {
            "database": vendor,
            "requests_served": sum(run["created"] + run["non_2xx"] for run in runs),
            "objects_created": sum(run["created"] for run in runs),
            "runs": runs,
            "passed": all(run["passed"] for run in runs),
        }
