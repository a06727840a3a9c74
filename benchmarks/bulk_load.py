"""Section ``bulk_load``: ``Model.objects.bulk_load`` against ``bulk_create`` and the bare loader.

Each run loads ``rows`` rows per key into empty tables, the keys taking turns in chunks of
50,000 rows (as the inserts section does, so a change of the machine's speed falls on every
key):

* ``bigauto``, ``snowflake``, ``uuid7``: build instances, ``bulk_create(batch_size=5000)``;
* ``bulk_load``: build SnowflakeModel instances, ``bulk_load()`` them (its default batches);
* ``bare``: the same rows as plain tuples through the bare loader with no ORM around it:
  a psycopg binary ``COPY`` on PostgreSQL, ``LOAD DATA LOCAL INFILE`` of a file (or
  ``executemany``) on MariaDB, ``executemany`` on SQLite. The ceiling.

Building and loading are timed apart, so one run gives both rates: *with construction*
(rows over build + load) and *pre-built* (rows over the load alone). MariaDB's connection is
reopened with ``local_infile`` so that ``bulk_load`` takes LOAD DATA where the server allows it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from django.db import connections, transaction

from django_snowflake import generate_many
from django_snowflake.bulk import DEFAULT_BATCH_SIZE, bulk_load

from . import databases
from .common import log, rotated, summary
from .report import DB_NAMES, Target, at_least, spread, table

KEYS = ("bigauto", "snowflake", "uuid7", "bulk_load", "bare")
BASELINES = ("bigauto", "snowflake", "uuid7")
CHUNK = 50_000
BATCH_SIZE = 5_000
LABEL = "benchmark"
NAMES = {
    "bigauto": "BigAutoField bulk_create",
    "snowflake": "SnowflakeModel bulk_create",
    "uuid7": "UUIDField UUIDv7 bulk_create",
    "bulk_load": "SnowflakeModel bulk_load",
    "bare": "bare loader (tuples, no ORM)",
}

#: A chunk of a load: (alias, first value, end) -> (seconds building, seconds loading).
Chunk = Callable[[str, int, int], tuple[float, float]]


def _orm_chunk(key: str) -> Chunk:
    from .benchapp.models import MODELS, BulkLoadRow

    model: Any = BulkLoadRow if key == "bulk_load" else MODELS[key]

    def load(alias: str, start: int, stop: int) -> tuple[float, float]:
        started = time.perf_counter()
        objs = [model(value=i, label=LABEL) for i in range(start, stop)]
        built = time.perf_counter()
        if key == "bulk_load":
            bulk_load(model.objects.using(alias), objs)
        else:
            model.objects.using(alias).bulk_create(objs, batch_size=BATCH_SIZE)
        return built - started, time.perf_counter() - built

    return load


def _bare_chunk(alias: str, start: int, stop: int) -> tuple[float, float]:
    from .benchapp.models import RawRow

    connection = connections[alias]
    table = RawRow._meta.db_table
    started = time.perf_counter()
    count = stop - start
    rows = list(zip(generate_many(count), range(start, stop), [LABEL] * count, strict=True))
    built = time.perf_counter()
    connection.ensure_connection()
    raw: Any = connection.connection
    with transaction.atomic(using=alias):
        if connection.vendor == "postgresql":
            with (
                raw.cursor() as cursor,
                cursor.copy(f"COPY {table} (id, value, label) FROM STDIN (FORMAT BINARY)") as copy,
            ):
                copy.set_types(["int8", "int4", "varchar"])
                for row in rows:
                    copy.write_row(row)
        elif connection.vendor == "mysql" and _local_infile(alias):
            fd, path = tempfile.mkstemp(suffix=".tsv")
            try:
                with os.fdopen(fd, "w") as file:
                    file.writelines(f"{a}\t{b}\t{c}\n" for a, b, c in rows)
                with raw.cursor() as cursor:
                    cursor.execute(
                        f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} (id, value, label)", [path]
                    )
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        else:
            marker = "?" if connection.vendor == "sqlite" else "%s"
            sql = f"INSERT INTO {table} (id, value, label) VALUES ({marker}, {marker}, {marker})"
            if connection.vendor == "sqlite":
                raw.executemany(sql, rows)
            else:
                with raw.cursor() as cursor:
                    cursor.executemany(sql, rows)
    return built - started, time.perf_counter() - built


def _local_infile(alias: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT @@local_infile")
        return bool(int(cursor.fetchone()[0]))


def _tables() -> dict[str, Any]:
    # Imported here: the page and the targets (below) are rendered without Django set up.
    from .benchapp.models import MODELS, BulkLoadRow, RawRow

    return {
        **{key: MODELS[key] for key in BASELINES},
        "bulk_load": BulkLoadRow,
        "bare": RawRow,
    }


def interleaved_run(alias: str, rows: int, run_number: int) -> dict[str, dict[str, float]]:
    databases.checkpoint(alias)
    loads: dict[str, Chunk] = {key: _orm_chunk(key) for key in KEYS if key != "bare"}
    loads["bare"] = _bare_chunk
    seconds = {key: [0.0, 0.0] for key in KEYS}
    for number, start in enumerate(range(0, rows, CHUNK)):
        for key in rotated(KEYS, run_number + number):
            build, load = loads[key](alias, start, min(rows, start + CHUNK))
            seconds[key][0] += build
            seconds[key][1] += load
    return {
        key: {"built": rows / (build + load), "prebuilt": rows / load}
        for key, (build, load) in seconds.items()
    }


def run_database(alias: str, runs: int, rows: int) -> dict[str, Any]:
    if connections[alias].vendor == "mysql":
        # The client side of LOAD DATA LOCAL: mysqlclient opens no file without it.
        connections[alias].close()
        connections[alias].settings_dict.setdefault("OPTIONS", {})["local_infile"] = 1
    tables = _tables()
    results: dict[str, list[dict[str, float]]] = {key: [] for key in KEYS}
    for run_number in range(runs):
        for model in tables.values():
            databases.recreate_table(model, alias)
        for key, result in interleaved_run(alias, rows, run_number).items():
            results[key].append(result)
        log(
            f"{alias} bulk_load run {run_number + 1}/{runs} ({rows:,} rows): "
            + ", ".join(f"{key} {results[key][-1]['built']:,.0f}/s" for key in KEYS)
        )
    for model in tables.values():
        databases.recreate_table(model, alias)  # leave nothing large behind
    path = "COPY (binary)"
    if connections[alias].vendor == "mysql":
        path = "LOAD DATA LOCAL INFILE" if _local_infile(alias) else "multi-row INSERT"
    elif connections[alias].vendor == "sqlite":
        path = "executemany"
    out: dict[str, Any] = {"rows": rows, "runs": runs, "chunk_rows": CHUNK, "path": path}
    out["keys"] = {
        key: {mode: summary([run[mode] for run in runs_]) for mode in ("built", "prebuilt")}
        for key, runs_ in results.items()
    }
    ratios: dict[str, Any] = {}
    for mode in ("built", "prebuilt"):
        for other in (*BASELINES, "bare"):
            ratios[f"{mode}: bulk_load/{other}"] = summary(
                [
                    load[mode] / base[mode]
                    for load, base in zip(results["bulk_load"], results[other], strict=True)
                ]
            )
    out["ratios"] = ratios
    return out


def _rss_mib() -> float:
    """This process's resident memory now, in MiB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory(alias: str, rows: int) -> dict[str, Any]:
    """Resident memory while ``bulk_load`` streams ``rows`` instances from a generator.

    Flat means the last sample is no higher than the first: the generator's instances are
    built a batch at a time and dropped once loaded, whatever the number of rows.
    """
    from .benchapp.models import BulkLoadRow

    databases.recreate_table(BulkLoadRow, alias)
    every = max(rows // 10, DEFAULT_BATCH_SIZE)
    samples: list[tuple[int, float]] = [(0, _rss_mib())]

    def progress(done: int) -> None:
        if done % every == 0 or done == rows:
            samples.append((done, _rss_mib()))
            log(f"{alias} bulk_load memory: {done:,} rows, {samples[-1][1]:.0f} MiB")

    started = time.perf_counter()
    made = (BulkLoadRow(value=i, label=LABEL) for i in range(rows))
    bulk_load(BulkLoadRow.objects.using(alias), made, progress=progress)
    seconds = time.perf_counter() - started
    databases.recreate_table(BulkLoadRow, alias)
    after_first = samples[1][1]
    return {
        "rows": rows,
        "seconds": seconds,
        "samples": samples,
        "growth_mib": samples[-1][1] - after_first,
    }


def run(aliases: list[str], runs: int, rows: int, memory_rows: int) -> dict[str, Any]:
    results = {alias: run_database(alias, runs, rows) for alias in aliases}
    for alias in aliases:
        results[alias]["memory"] = memory(alias, memory_rows)
    return results


# The goals (issue 14): (database, ratio, goal).
GOALS = (
    ("postgresql", "built: bulk_load/bigauto", 3.0),
    ("postgresql", "prebuilt: bulk_load/bigauto", 8.0),
    ("postgresql", "prebuilt: bulk_load/bare", 0.8),
    ("mariadb", "built: bulk_load/bigauto", 2.0),
    ("sqlite", "built: bulk_load/bigauto", 2.0),
)


def targets(results: dict[str, Any]) -> list[Target]:
    """(what, measured, target, met) for this section's goals."""
    rows: list[Target] = []
    section = results.get("bulk_load", {})
    for db, name, goal in GOALS:
        if db not in section:
            continue
        mode, pair = name.split(": ")
        what = "pre-built" if mode == "prebuilt" else "with construction"
        label = f"{DB_NAMES[db]} {pair.replace('/', ' vs ')} ({what})"
        rows.append(at_least(label, section[db]["ratios"][name], goal))
    return rows


TEXT = """\
``bulk_load`` (see :doc:`bulk_loading`) against ``bulk_create`` of three keys and against the bare loader, {bulk_load_rows:,} rows per key and database, keys taking turns in chunks of 50,000 rows.
*With construction* counts building the instances (or tuples) and loading them; *pre-built* counts the load alone.
Ratios are ``bulk_load``'s rate over the other's, paired run by run.

"""


def render(results: dict[str, Any]) -> str:
    parts = []
    own = results.get("bulk_load_machine")
    if own:
        # A bulk_load section measured in a run of its own, merged into a full run's results.
        load = ", ".join(f"{value:.2f}" for value in own["load_average_at_end"])
        parts.append(
            f"This section was measured in a run of its own on {own['date'][:10]} "
            f"(``python -m benchmarks --only bulk_load``, {own['seconds'] / 60:.0f} minutes, "
            f"load average {load} at its end).\n"
        )
    for db, section in results["bulk_load"].items():
        rows = []
        for key in KEYS:
            entry = section["keys"][key]
            cells = [NAMES[key]]
            for mode in ("built", "prebuilt"):
                cells.append(spread(entry[mode], "{:,.0f}"))
                cells.append(
                    ""
                    if key == "bulk_load"
                    else spread(section["ratios"][f"{mode}: bulk_load/{key}"], "{:.2f}x")
                )
            rows.append(cells)
        parts.append(
            f"**{DB_NAMES[db]}** ({section['rows']:,} rows, {section['runs']} runs; "
            f"bulk_load path: {section['path']})\n\n"
            + table(
                [
                    "loader",
                    "rows/s, with construction",
                    "bulk_load vs it",
                    "rows/s, pre-built",
                    "bulk_load vs it",
                ],
                rows,
            )
        )
        if "memory" in section:
            parts.append(_memory_text(DB_NAMES[db], section["memory"]))
    return "\n".join(parts)


def _memory_text(db: str, memory: dict[str, Any]) -> str:
    samples = memory["samples"][1:]
    (first_rows, first), (last_rows, last) = samples[0], samples[-1]
    highest = max(mib for _, mib in samples)
    return (
        f"Memory on {db}: {memory['rows']:,} instances streamed from a generator in "
        f"{memory['seconds']:.0f} s; resident memory {first:.0f} MiB after {first_rows:,} rows, "
        f"{last:.0f} MiB after {last_rows:,} (highest sample {highest:.0f} MiB, "
        f"{len(samples)} samples).\n"
    )
