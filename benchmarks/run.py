"""The benchmark runner: ``python -m benchmarks [--quick] [--only SECTION ...]``.

Measures, in one run and on this machine, django_snowflake against its baselines:
generation, model construction, inserts (SQLite, PostgreSQL, MariaDB), worker claims,
bulk_load and concurrent inserts.
Writes ``benchmarks/results/<date>[-quick].json`` and ``latest[-quick].json`` (a run of some
sections only: ``<date>-<sections>[-quick].json`` and ``latest-<sections>[-quick].json``, so
that it does not replace the full run's); a full run (no ``--quick``, every section and
database) also rewrites ``docs/performance.rst`` and ``docs/_static/performance.png`` from its
results (``--report FILE`` re-renders them from a results file alone). A run of the
``concurrency`` section alone rewrites that section of the page (``--report FILE --only
concurrency`` from a results file).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = ("generation", "construction", "inserts", "claims", "bulk_load", "concurrency")
#: The sections whose part of the page a run of their own rewrites.
SPLICED = ("concurrency",)
DATABASES = ("sqlite", "postgresql", "mariadb")

# Sizes of a full run, and of a --quick one (rows scaled down 20-100x, herds to a quarter).
FULL: dict[str, Any] = {
    "micro_rounds": 21,
    "calls": 100_000,
    "batches": 25,
    "instances": 50_000,
    "bulk_rows": 1_000_000,
    "bulk_runs": 5,
    "create_rows": 20_000,
    "create_runs": 5,
    "preload_rows": 5_000_000,
    "preloaded_runs": 5,
    "claim_runs": 5,
    "herds": (32, 64),
    "bulk_load_rows": 1_000_000,
    "bulk_load_runs": 3,
    "bulk_load_memory_rows": 10_000_000,
    "concurrency_rounds": 3,
    "concurrency_turns": 4,
    "concurrency_turn_seconds": 3,
    "concurrency_probe_rows": 200_000,
    "concurrency_probe_runs": 3,
}
QUICK: dict[str, Any] = {
    "micro_rounds": 7,
    "calls": 50_000,
    "batches": 10,
    "instances": 20_000,
    "bulk_rows": 20_000,
    "bulk_runs": 5,
    "create_rows": 1_000,
    "create_runs": 5,
    "preload_rows": 100_000,
    "preloaded_runs": 5,
    "claim_runs": 5,
    "herds": (8, 16),
    "bulk_load_rows": 20_000,
    "bulk_load_runs": 3,
    "bulk_load_memory_rows": 200_000,
    "concurrency_rounds": 1,
    "concurrency_turns": 2,
    "concurrency_turn_seconds": 0.5,
    "concurrency_probe_rows": 20_000,
    "concurrency_probe_runs": 1,
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: rows scaled down")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run these sections only")
    parser.add_argument(
        "--databases", nargs="+", choices=DATABASES, default=list(DATABASES), metavar="DB"
    )
    parser.add_argument("--report", metavar="FILE", help="only render the docs from FILE")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs page")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    from . import page

    if args.report:
        report = json.loads(Path(args.report).read_text())
        if args.only and set(args.only) <= set(SPLICED):
            for section in args.only:
                page.splice(report, section)
        else:
            page.render(report)
        return

    import django

    django.setup()
    from . import claims, construction, databases, generation, inserts
    from .common import log, machine

    sizes = QUICK if args.quick else FULL
    sections = args.only or list(SECTIONS)
    aliases = list(args.databases)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "quick": args.quick,
        "sizes": {
            key: list(value) if isinstance(value, tuple) else value for key, value in sizes.items()
        },
        "machine": machine(),
    }
    databases.create(aliases)
    try:
        results["servers"] = databases.server_facts(aliases)
        durations: dict[str, float] = {}
        results["section_seconds"] = durations
        RESULTS.mkdir(exist_ok=True)
        partial = RESULTS / f"partial{'-quick' if args.quick else ''}.json"

        def checkpoint() -> None:
            # A long run that dies keeps what it measured.
            partial.write_text(json.dumps(results, indent=1))

        def measure_inserts() -> dict[str, Any]:
            found: dict[str, Any] = results.setdefault("inserts", {})
            for alias in aliases:
                found[alias] = {
                    "bulk": inserts.run_loads(
                        alias,
                        "bulk",
                        sizes["bulk_runs"],
                        sizes["bulk_rows"],
                        # The control isolates what sending the key costs (docs: Inserts).
                        (*inserts.KEYS, "control") if alias == "postgresql" else inserts.KEYS,
                    ),
                    "create": inserts.run_loads(
                        alias,
                        "create",
                        sizes["create_runs"],
                        sizes["create_rows"],
                        (*inserts.KEYS, "raw") if alias == "postgresql" else inserts.KEYS,
                    ),
                }
                checkpoint()
            if "postgresql" in aliases:
                found["postgresql"]["bulk_preloaded"] = inserts.run_preloaded(
                    sizes["preloaded_runs"], sizes["preload_rows"], sizes["bulk_rows"]
                )
            return found

        def section(name: str) -> Any:
            # bulk_load and concurrency are imported only when they run.
            return importlib.import_module(f".{name}", __package__)

        measures: dict[str, Callable[[], Any]] = {
            "generation": lambda: generation.run(
                sizes["micro_rounds"], sizes["calls"], sizes["batches"]
            ),
            "construction": lambda: construction.run(sizes["micro_rounds"], sizes["instances"]),
            "inserts": measure_inserts,
            "claims": lambda: claims.run(aliases, sizes["claim_runs"], tuple(sizes["herds"])),
            "bulk_load": lambda: section("bulk_load").run(
                aliases,
                sizes["bulk_load_runs"],
                sizes["bulk_load_rows"],
                sizes["bulk_load_memory_rows"],
            ),
            "concurrency": lambda: section("concurrency").run(
                aliases,
                sizes["concurrency_rounds"],
                sizes["concurrency_turns"],
                sizes["concurrency_turn_seconds"],
                sizes["concurrency_probe_rows"],
                sizes["concurrency_probe_runs"],
            ),
        }
        for name in SECTIONS:
            if name in sections:
                mark = time.perf_counter()
                results[name] = measures[name]()
                durations[name] = time.perf_counter() - mark
                checkpoint()
    finally:
        from django_snowflake import runtime

        runtime.reset()  # release the runner's own slot before its database goes
        databases.drop(aliases)
    results["duration_seconds"] = time.perf_counter() - started
    results["machine"]["load_average_at_end"] = os.getloadavg()
    complete = set(sections) == set(SECTIONS) and set(aliases) == set(DATABASES)
    RESULTS.mkdir(exist_ok=True)
    suffix = ("" if complete else "-" + "-".join(s for s in SECTIONS if s in sections)) + (
        "-quick" if args.quick else ""
    )
    stamp = results["machine"]["date"][:19].replace(":", "")
    text = json.dumps(results, indent=1)
    (RESULTS / f"{stamp}{suffix}.json").write_text(text)
    (RESULTS / f"latest{suffix}.json").write_text(text)
    (RESULTS / f"partial{'-quick' if args.quick else ''}.json").unlink(missing_ok=True)
    log(
        f"results in {RESULTS / f'latest{suffix}.json'}; took {results['duration_seconds'] / 60:.1f} min"
    )
    for line in page.target_lines(results):
        print(line)
    if complete and not args.quick and not args.no_docs:
        page.render(results)
        log("docs/performance.rst and docs/_static/performance.png rewritten")
    elif not complete and not args.quick and not args.no_docs:
        for section in SPLICED:
            if section in sections:
                page.splice(results, section)
                log(f"docs/performance.rst: section {section} rewritten")
    sys.stdout.flush()
