"""Section ``concurrency``: keyed inserts from 1, 8 and 32 concurrent clients, against the
server's own auto-increment, on PostgreSQL and MariaDB.

Two paths, each a Snowflake side against its baseline:

* ``create``: Django's ``Model.objects.create(label=...)`` of a model under the switch
  (``benchmarks.switchapp``, whose ``default_auto_field`` is ``SnowflakeAutoField``) against
  the same model with ``BigAutoField`` (``benchmarks.benchapp``);
* ``sql``: a raw ``INSERT INTO t (label) VALUES (%s)`` through the bare driver, as another
  service writes, into the switch's table (its key made by the database's function) against a
  ``BIGSERIAL`` (PostgreSQL) / ``AUTO_INCREMENT`` (MariaDB) table.

Every client is a process of its own (forked once for the section, so that no client shares
the GIL) with its own connection, in autocommit: one transaction per row. For each database,
number of clients and path, the two sides take turns of a few seconds, in an order rotated
from turn to turn and round to round, so that both meet the same machine; a side's rate is its
rows over the time of its own turns, and the ratio (Snowflake over baseline) is taken per
round, then summarised over the rounds. Tables are emptied at the start of every round.

The lock scope probe: while one connection runs an ``INSERT ... SELECT`` of many rows into one
keyed table, another times a single-row ``INSERT`` into an unrelated keyed table, for the
switch's tables and for the baseline's, in turns.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from django.conf import settings
from django.db import connections

from . import databases
from .common import PROBES, ROOT, day, log, probe, rotated, summary
from .report import DB_NAMES, Target, at_least, spread, table

SERVERS = ("postgresql", "mariadb")
CLIENTS = (1, 8, 32)
PATHS = ("create", "sql")
SIDES = ("snowflake", "baseline")
LABEL = "concurrency"
GOAL = 0.8
#: Issue 26's goals on MariaDB, whose keys from the database come from a column default:
#: create() at 0.95x BigAutoField, a raw INSERT at 0.9x AUTO_INCREMENT.
GOALS = {("mariadb", "create"): 0.95, ("mariadb", "sql"): 0.9}
#: Seconds between sending a turn to the clients and its start: time for all of them to
#: receive it, so that they start together.
LEAD_SECONDS = 0.2
#: Untimed inserts of each side by each client before a block's first turn: its connection is
#: open, its worker slot claimed.
WARM_ROWS = 20
#: The results of a run on the code before the switch moved (issue 19), kept as a record:
#: the page sets the current figures beside them.
BEFORE = ROOT / "benchmarks" / "results" / "concurrency-before-switch-af0b280.json"
#: A run on the code before MariaDB's keys moved to a column default (issue 26), on MariaDB:
#: the trigger on every keyed table.
BEFORE_DEFAULT = ROOT / "benchmarks" / "results" / "concurrency-before-column-default-cdf2bcb.json"


def _models() -> dict[tuple[str, str], Any]:
    from .benchapp import models as baseline
    from .switchapp import models as switch

    return {
        ("create", "snowflake"): switch.CreateRow,
        ("create", "baseline"): baseline.CreateRow,
        ("sql", "snowflake"): switch.SqlRow,
        ("sql", "baseline"): baseline.SqlRow,
    }


def _loadavg() -> list[float]:
    return list(os.getloadavg())


def driver_connection(alias: str) -> Any:
    """A bare driver connection to ``alias``'s database in autocommit: another service."""
    conf = settings.DATABASES[alias]
    if alias == "postgresql":
        import psycopg

        return psycopg.connect(
            host=conf["HOST"],
            port=conf["PORT"],
            user=conf["USER"],
            password=conf["PASSWORD"] or None,
            dbname=conf["NAME"],
            autocommit=True,
        )
    import MySQLdb

    return MySQLdb.connect(
        host=conf["HOST"],
        port=int(conf["PORT"]),
        user=conf["USER"],
        password=conf["PASSWORD"],
        database=conf["NAME"],
        charset="utf8mb4",
        autocommit=True,
    )


# The clients.


class _Client:
    """One client process's state: at most one open connection, Django's or the driver's."""

    def __init__(self) -> None:
        self.models = _models()
        self.raw: Any = None
        self.raw_alias = ""

    def close(self) -> None:
        connections.close_all()
        if self.raw is not None:
            self.raw.close()
            self.raw = None

    def open(self, alias: str, path: str) -> None:
        if path == "sql":
            connections.close_all()
            if self.raw_alias != alias and self.raw is not None:
                self.raw.close()
                self.raw = None
            if self.raw is None:
                self.raw, self.raw_alias = driver_connection(alias), alias
        else:
            if self.raw is not None:
                self.raw.close()
                self.raw = None
            for other in SERVERS:
                if other != alias:
                    connections[other].close()
            connections[alias].ensure_connection()

    def insert(self, alias: str, path: str, side: str) -> Any:
        """A function inserting one row (the connection is open)."""
        model = self.models[(path, side)]
        if path == "create":
            manager = model.objects.db_manager(alias)

            def create() -> None:
                manager.create(label=LABEL)

            return create
        cursor = self.raw.cursor()
        sql = f"INSERT INTO {model._meta.db_table} (label) VALUES (%s)"
        params = [LABEL]

        def execute() -> None:
            cursor.execute(sql, params)

        return execute

    def run(self, alias: str, path: str, side: str, start: float, seconds: float) -> Any:
        insert = self.insert(alias, path, side)
        deadline = start + seconds
        rows = errors = 0
        first_error = ""
        while time.monotonic() < start:
            time.sleep(min(0.01, max(0.0, start - time.monotonic())))
        while True:
            try:
                insert()
            except Exception as exc:  # counted and reported, never hidden
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"[:300]
                if time.monotonic() >= deadline:
                    break
                continue
            if time.monotonic() >= deadline:  # a row finished after the turn does not count
                break
            rows += 1
        return rows, errors, first_error


def _serve(pipe: Connection) -> None:
    client = _Client()
    try:
        while True:
            command = pipe.recv()
            if command is None:
                break
            kind, *args = command
            if kind == "close":
                client.close()
                pipe.send("ok")
            elif kind == "warm":
                alias, path = args
                client.open(alias, path)
                for side in SIDES:
                    insert = client.insert(alias, path, side)
                    for _ in range(WARM_ROWS):
                        insert()
                pipe.send("ok")
            elif kind == "run":
                pipe.send(client.run(*args))
    except Exception as exc:  # the parent reports it
        pipe.send(f"failed: {type(exc).__name__}: {exc}")
    finally:
        client.close()


class Pool:
    """``size`` client processes, forked once (every Django connection closed first)."""

    def __init__(self, size: int) -> None:
        connections.close_all()
        context = multiprocessing.get_context("fork")
        self.pipes: list[Connection] = []
        self.processes = []
        for _ in range(size):
            parent, child = context.Pipe()
            process = context.Process(target=_serve, args=(child,), daemon=True)
            process.start()
            child.close()
            self.pipes.append(parent)
            self.processes.append(process)

    def ask(self, clients: int, command: tuple[Any, ...]) -> list[Any]:
        """Send ``command`` to the first ``clients`` clients; their answers."""
        for pipe in self.pipes[:clients]:
            pipe.send(command)
        answers = [pipe.recv() for pipe in self.pipes[:clients]]
        failed = [a for a in answers if isinstance(a, str) and a.startswith("failed")]
        if failed:
            raise RuntimeError(f"{len(failed)} of {clients} clients {failed[0]}")
        return answers

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()


def _block(
    pool: Pool, alias: str, path: str, clients: int, turns: int, turn_seconds: float, seed: int
) -> dict[str, Any]:
    """One round's measurement of one path at one number of clients: the sides in turns."""
    pool.ask(len(pool.pipes), ("close",))
    pool.ask(clients, ("warm", alias, path))
    rows = dict.fromkeys(SIDES, 0)
    seconds = dict.fromkeys(SIDES, 0.0)
    errors = dict.fromkeys(SIDES, 0)
    first_errors: dict[str, str] = {}
    for turn in range(turns):
        for side in rotated(SIDES, seed + turn):
            start = time.monotonic() + LEAD_SECONDS
            for count, failed, message in pool.ask(
                clients, ("run", alias, path, side, start, turn_seconds)
            ):
                rows[side] += count
                errors[side] += failed
                if message and side not in first_errors:
                    first_errors[side] = message
            seconds[side] += turn_seconds
    out: dict[str, Any] = {
        side: {"rows_per_second": rows[side] / seconds[side], "errors": errors[side]}
        for side in SIDES
    }
    if first_errors:
        out["first_errors"] = first_errors
    return out


# The lock scope probe.


def _bulk_sql(alias: str, table: str, rows: int) -> str:
    if alias == "postgresql":
        return f"INSERT INTO {table} (label) SELECT %s FROM generate_series(1, {rows})"
    return f"INSERT INTO {table} (label) SELECT %s FROM mysql.seq_1_to_{rows}"


def _probe_once(alias: str, side: str, rows: int) -> dict[str, Any]:
    models = _models()
    big, small = models[("sql", side)], models[("create", side)]
    for model in (big, small):
        databases.recreate_table(model, alias)
    connections[alias].close()
    loader, writer = driver_connection(alias), driver_connection(alias)
    try:
        single = f"INSERT INTO {small._meta.db_table} (label) VALUES (%s)"
        with writer.cursor() as cursor:
            started = time.perf_counter()
            cursor.execute(single, [LABEL])
            idle = time.perf_counter() - started
        times: dict[str, float] = {}

        def load() -> None:
            with loader.cursor() as cursor:
                times["load_start"] = time.perf_counter()
                cursor.execute(_bulk_sql(alias, big._meta.db_table, rows), [LABEL])
                times["load_end"] = time.perf_counter()

        thread = threading.Thread(target=load)
        thread.start()
        time.sleep(0.2)
        with writer.cursor() as cursor:
            times["single_start"] = time.perf_counter()
            cursor.execute(single, [LABEL])
            times["single_end"] = time.perf_counter()
        thread.join()
    finally:
        loader.close()
        writer.close()
    return {
        "idle_ms": idle * 1000,
        "wait_ms": (times["single_end"] - times["single_start"]) * 1000,
        "load_seconds": times["load_end"] - times["load_start"],
        # The single row went in while the load was running (else it measured nothing).
        "during_load": times["single_start"] < times["load_end"],
    }


def lock_probe(alias: str, rows: int, runs: int) -> dict[str, Any]:
    raw: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for run in range(runs):
        for side in rotated(SIDES, run):
            raw[side].append(_probe_once(alias, side, rows))
    log(
        f"{alias} lock probe ({rows:,} rows loading): single INSERT "
        + ", ".join(f"{side} {[round(r['wait_ms'], 1) for r in raw[side]]} ms" for side in SIDES)
    )
    return {
        "rows": rows,
        "runs": runs,
        **{
            side: {
                "wait_ms": summary([r["wait_ms"] for r in raw[side]]),
                "idle_ms": summary([r["idle_ms"] for r in raw[side]]),
                "load_seconds": summary([r["load_seconds"] for r in raw[side]]),
                "during_load": sum(r["during_load"] for r in raw[side]),
            }
            for side in SIDES
        },
    }


# The section.


def run(
    aliases: list[str],
    rounds: int,
    turns: int,
    turn_seconds: float,
    probe_rows: int,
    probe_runs: int,
) -> dict[str, Any]:
    servers = [alias for alias in SERVERS if alias in aliases]
    models = _models()
    started = time.perf_counter()
    loads: list[list[float]] = [_loadavg()]
    raw: dict[str, dict[str, dict[int, list[dict[str, Any]]]]] = {
        alias: {path: {n: [] for n in CLIENTS} for path in PATHS} for alias in servers
    }
    pool = Pool(max(CLIENTS))
    try:
        for round_number in range(rounds):
            for alias in rotated(servers, round_number):
                pool.ask(len(pool.pipes), ("close",))
                for model in models.values():
                    databases.recreate_table(model, alias)
                connections[alias].close()
                for clients in rotated(CLIENTS, round_number):
                    for path in rotated(PATHS, round_number + clients):
                        loads.append(_loadavg())
                        result = _block(
                            pool, alias, path, clients, turns, turn_seconds, round_number
                        )
                        raw[alias][path][clients].append(result)
                        log(
                            f"concurrency round {round_number + 1}/{rounds} {alias} {path} "
                            f"{clients} clients: "
                            + ", ".join(
                                f"{side} {result[side]['rows_per_second']:,.0f}/s"
                                + (
                                    f" ({result[side]['errors']} errors)"
                                    if result[side]["errors"]
                                    else ""
                                )
                                for side in SIDES
                            )
                            + f"; load {loads[-1][0]:.1f}"
                        )
        pool.ask(len(pool.pipes), ("close",))
    finally:
        pool.close()
    probes = {}
    for alias in servers:
        loads.append(_loadavg())
        probes[alias] = lock_probe(alias, probe_rows, probe_runs)
    loads.append(_loadavg())
    for alias in servers:
        for model in models.values():
            databases.recreate_table(model, alias)  # leave nothing large behind
        connections[alias].close()
    out: dict[str, Any] = {}
    for alias in servers:
        out[alias] = {"lock_probe": probes[alias]}
        for path in PATHS:
            out[alias][path] = {}
            for clients in CLIENTS:
                runs = raw[alias][path][clients]
                entry: dict[str, Any] = {
                    side: {
                        "rows_per_second": summary([r[side]["rows_per_second"] for r in runs]),
                        "errors": sum(r[side]["errors"] for r in runs),
                    }
                    for side in SIDES
                }
                entry["ratio"] = summary(
                    [
                        r["snowflake"]["rows_per_second"] / r["baseline"]["rows_per_second"]
                        if r["baseline"]["rows_per_second"]
                        else 0.0
                        for r in runs
                    ]
                )
                errors = [r["first_errors"] for r in runs if "first_errors" in r]
                if errors:
                    entry["first_errors"] = errors[0]
                out[alias][path][str(clients)] = entry
    return {
        "rounds": rounds,
        "turns": turns,
        "turn_seconds": turn_seconds,
        "clients": list(CLIENTS),
        "cpu_count": os.cpu_count(),
        "seconds": time.perf_counter() - started,
        "load_average": {
            "samples": loads,
            "one_minute": summary([load[0] for load in loads]),
        },
        "databases": out,
    }


# The page.

NAMES = {
    ("create", "snowflake"): "``create()``, ``SnowflakeAutoField`` (the switch)",
    ("create", "baseline"): "``create()``, ``BigAutoField``",
    ("sql", "snowflake"): "raw ``INSERT``, ``SnowflakeAutoField`` table (the database's key)",
    ("sql", "baseline"): "raw ``INSERT``, {auto} table",
}
AUTO = {"postgresql": "``BIGSERIAL``", "mariadb": "``AUTO_INCREMENT``"}
PATH_NAMES = {"create": "create()", "sql": "raw INSERT"}


def targets(results: dict[str, Any]) -> list[Target]:
    section = results.get("concurrency")
    if not section:
        return []
    rows = []
    for db, entry in section["databases"].items():
        for path in PATHS:
            baseline = "BigAutoField" if path == "create" else AUTO[db].strip("`")
            rows.append(
                at_least(
                    f"{DB_NAMES[db]} {PATH_NAMES[path]} from 32 clients vs {baseline}",
                    entry[path]["32"]["ratio"],
                    GOALS.get((db, path), GOAL),
                )
            )
    return rows


TEXT = """\
Inserts from 1, 8 and 32 concurrent clients, each a process of its own with its own connection, in autocommit (a transaction per row), on the two servers:

- ``create()``: Django's ``Model.objects.create(label=...)`` of a model under the switch (an app whose ``default_auto_field`` is ``SnowflakeAutoField``), against the same model with ``BigAutoField``;
- raw ``INSERT``: ``INSERT INTO t (label) VALUES (%s)`` through the bare driver, as another service writes, into the switch's table (its key made by the database: PostgreSQL's ``django_snowflake_id()``, MariaDB's column default over one sequence), against a ``BIGSERIAL`` (PostgreSQL) or ``AUTO_INCREMENT`` (MariaDB) table.

For each server, number of clients and path, the Snowflake side and its baseline take turns of {concurrency_turn_seconds} s ({concurrency_turns} each per round, the order rotated), so both meet the same machine; a side's rate is its rows over its own turns, and the ratio is Snowflake over baseline in the same round, summarised over {concurrency_rounds} rounds.
The clients run on the same 2 cores as the servers, so the absolute rates are the machine's; the ratios are the figures.
SQLite, which lets one writer in at a time, is not measured here.
The goal: at 32 clients, at least {goal}x the baseline on both paths; on MariaDB, whose keys from the database come from a column default with no trigger, ``create()`` at 0.95x and raw ``INSERT`` at 0.9x.
``python -m benchmarks --only concurrency`` runs this section alone and rewrites this part of the page.

"""


def _rates(db: str, entry: dict[str, Any]) -> str:
    rows = []
    for path in PATHS:
        for side in SIDES:
            name = NAMES[(path, side)].format(auto=AUTO[db])
            cells = [
                spread(entry[path][str(n)][side]["rows_per_second"], "{:,.0f}") for n in CLIENTS
            ]
            errors = sum(entry[path][str(n)][side]["errors"] for n in CLIENTS)
            rows.append([name + (f" ({errors} failed inserts)" if errors else ""), *cells])
        rows.append(
            [
                f"**ratio**, {PATH_NAMES[path]}",
                *(f"**{spread(entry[path][str(n)]['ratio'], '{:.2f}x')}**" for n in CLIENTS),
            ]
        )
    header = ["rows per second", *(f"{n} client{'s' if n > 1 else ''}" for n in CLIENTS)]
    return table(header, rows, "40 20 20 20")


def _probe_table(section: dict[str, Any]) -> str:
    rows = []
    for db, entry in section["databases"].items():
        probe = entry["lock_probe"]
        for side in SIDES:
            name = "``SnowflakeAutoField`` tables" if side == "snowflake" else f"{AUTO[db]} tables"
            result = probe[side]
            rows.append(
                [
                    f"{DB_NAMES[db]}, {name}",
                    spread(result["wait_ms"], "{:,.1f}"),
                    spread(result["idle_ms"], "{:,.1f}"),
                    spread(result["load_seconds"], "{:.2f}"),
                    f"{result['during_load']} of {probe['runs']}",
                ]
            )
    return table(
        [
            "tables",
            "single INSERT during the load (ms)",
            "the same, alone (ms)",
            "the load (s)",
            "single INSERT started while the load ran",
        ],
        rows,
        "28 20 16 16 20",
    )


def _probe_reading(item: tuple[str, dict[str, Any]]) -> str:
    """One sentence per server: the wait and the load, each against the baseline's."""
    db, entry = item
    probe = entry["lock_probe"]
    ours, theirs = probe["snowflake"], probe["baseline"]
    return (
        f"{DB_NAMES[db]}: the single row took {ours['wait_ms']['median']:,.1f} ms against "
        f"{theirs['wait_ms']['median']:,.1f} ms beside {AUTO[db]} tables "
        + (
            "(it waited for the load: the lock spans tables and the whole statement); "
            if ours["wait_ms"]["median"] > 500 * ours["load_seconds"]["median"]
            else "(it did not wait for the load); "
        )
        + f"the load of {probe['rows']:,} rows itself took {ours['load_seconds']['median']:.2f} s "
        f"against {theirs['load_seconds']['median']:.2f} s "
        f"({ours['load_seconds']['median'] / theirs['load_seconds']['median']:.1f}x as long)."
    )


def _run_line(results: dict[str, Any], section: dict[str, Any]) -> str:
    meta = results["machine"]
    load = section["load_average"]["one_minute"]
    return (
        f"Measured {meta['date'][:16].replace('T', ' ')} UTC at commit ``{meta['commit']}`` "
        f"({section['seconds'] / 60:.0f} minutes, {meta['cores']} cores shared with other "
        f"work: 1-minute load average {load['min']:.1f} to {load['max']:.1f} during the run, "
        f"median {load['median']:.1f})"
        + (
            ".\n"
            if not meta.get("uncommitted_package_files")
            else "; the tree measured also held uncommitted changes to "
            + ", ".join(f"``{line[3:]}``" for line in meta["uncommitted_package_files"])
            + ".\n"
        )
    )


def _before_after(before: dict[str, Any], after: dict[str, Any], label: str) -> str:
    rows = []
    for db in after["concurrency"]["databases"]:
        if db not in before["concurrency"]["databases"]:
            continue
        for path in PATHS:
            for n in CLIENTS:
                old = before["concurrency"]["databases"][db][path][str(n)]["ratio"]
                new = after["concurrency"]["databases"][db][path][str(n)]["ratio"]
                rows.append(
                    [
                        f"{DB_NAMES[db]}, {PATH_NAMES[path]}, {n} client{'s' if n > 1 else ''}",
                        spread(old, "{:.2f}x"),
                        spread(new, "{:.2f}x"),
                    ]
                )
        for side in SIDES:
            name = "Snowflake" if side == "snowflake" else AUTO[db]
            for key, what, fmt in (
                ("wait_ms", "single INSERT during the load (ms)", "{:,.1f}"),
                ("load_seconds", "the load (s)", "{:.2f}"),
            ):
                rows.append(
                    [
                        f"{DB_NAMES[db]}, lock scope, {name} tables: {what}",
                        *(
                            spread(
                                run["concurrency"]["databases"][db]["lock_probe"][side][key], fmt
                            )
                            for run in (before, after)
                        ),
                    ]
                )
    meta = before["machine"]
    load = before["concurrency"]["load_average"]["one_minute"]
    heading = label.format(
        commit=meta["commit"],
        date=meta["date"][:16].replace("T", " "),
        low=load["min"],
        high=load["max"],
    )
    return f"{heading}, and in the run above:\n\n" + table(
        ["", "before", f"at ``{after['machine']['commit']}``"],
        rows,
        "50 25 25",
    )


def _trigger_floor() -> str:
    """What MariaDB's ways of giving a key in the server cost at all (``trigger_floor``)."""
    record = probe("mariadb_trigger_floor")
    at = {way: summary(by_clients["32"]) for way, by_clients in record["ratios"].items()}
    ratio = {
        way: f"{s['median']:.2f}x ({s['min']:.2f}x to {s['max']:.2f}x)" for way, s in at.items()
    }
    return (
        "**Why MariaDB's keys come from a column default.**\nA probe run by hand "
        f"(``python -m benchmarks.trigger_floor``, {day(record['date'])}, {record['server']}, "
        f"load average {record['load'][0]} to {record['load'][1]}) measured, against "
        "``AUTO_INCREMENT`` at 32 connections, what each step of giving a key in the server "
        f"costs: a column ``DEFAULT (NEXT VALUE FOR s)`` {ratio['default']}; a ``BEFORE INSERT`` "
        f"trigger setting ``NEXT VALUE FOR s`` {ratio['trigger']}; the trigger calling a stored "
        f"function that draws one sequence {ratio['function_1']}, or that names 15 (and draws "
        f"one) {ratio['function_15']}; the package's function {ratio['snowflake']}.\n"
        "A stored function cannot be a column's default, so the strict path "
        '(``SNOWFLAKE["MARIADB_KEYS"] = "trigger"``), whose function follows the wall clock, '
        "bounds its lead and notices a failover inside the INSERT, pays a trigger on every "
        "INSERT into a keyed table and the sequences its function names (MariaDB opens and "
        "locks each for every statement into the table); Django's ``create()`` gives the key "
        "itself, but its INSERT still fires the trigger, and pays the locks"
        + (_given(record["given"]) if "given" in record else ".")
        + "\nThe default path is the first of these: a column ``DEFAULT`` over one sequence, "
        "moved with the clock by the processes' heartbeats (:doc:`fields`).\n"
    )


def _given(given: dict[str, dict[str, list[float]]]) -> str:
    """The trigger ways' cost when the INSERT gives the key (``trigger_floor``)."""
    at = {way: summary(by_clients["32"]) for way, by_clients in given.items()}
    ratio = {
        way: f"{s['median']:.2f}x ({s['min']:.2f}x to {s['max']:.2f}x)" for way, s in at.items()
    }
    return (
        f": measured with the key given, the package's trigger is {ratio['snowflake']} of an "
        f"``AUTO_INCREMENT`` INSERT, one whose function names 15 sequences {ratio['function_15']} "
        f"and one that names no function {ratio['trigger']}."
    )


def render(results: dict[str, Any]) -> str:
    import json

    section = results["concurrency"]
    sizes = {key: value for key, value in results["sizes"].items() if key.startswith("concurrency")}
    parts = [TEXT.format(goal=GOAL, **sizes), _run_line(results, section)]
    for db, entry in section["databases"].items():
        parts.append(f"\n**{DB_NAMES[db]}**\n\n" + _rates(db, entry))
        errors = {
            f"{PATH_NAMES[path]}, {side}": message
            for path in PATHS
            for n in CLIENTS
            for side, message in entry[path][str(n)].get("first_errors", {}).items()
        }
        for what, message in errors.items():
            parts.append(f"\nFirst failed insert ({what}): ``{message}``\n")
    probe = next(iter(section["databases"].values()))["lock_probe"]
    parts.append(
        f"\n**Lock scope.** While one connection inserts {probe['rows']:,} rows with one "
        "``INSERT ... SELECT`` into a keyed table, another inserts a single row into an unrelated "
        f"keyed table, {probe['runs']} times for each kind of table, in turns.\n\n"
        + _probe_table(section)
        + "\n"
        + "\n".join(map(_probe_reading, section["databases"].items()))
        + "\n"
    )
    if "mariadb" in section["databases"] and (PROBES / "mariadb_trigger_floor.json").exists():
        parts.append("\n" + _trigger_floor())
    for record, label in (
        (
            BEFORE_DEFAULT,
            "Before MariaDB's keys moved to a column default (commit ``{commit}``, {date} UTC, "
            "load average {low:.1f} to {high:.1f}; raw INSERTs through the trigger and function, "
            "which every INSERT into a keyed table fired)",
        ),
        (
            BEFORE,
            "Before the switch moved (a record: commit ``{commit}``, {date} UTC, load average "
            "{low:.1f} to {high:.1f}; keys of both paths made by the database's function)",
        ),
    ):
        if record.exists():
            before = json.loads(record.read_text())
            if before["machine"]["commit"] != results["machine"]["commit"]:
                parts.append("\n" + _before_after(before, results, label))
    return "".join(parts)
