"""Helpers shared by the sections: summaries, the machine's description, progress output."""

from __future__ import annotations

import datetime
import gc
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness import ROOT

__all__ = ["ROOT"]
T = TypeVar("T")


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of the runs, and the runs themselves."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": list(values),
    }


# Probes run once by hand, apart from the benchmark, with the date they were run: records kept
# as data in benchmarks/probes/, so the page's modules hold the sentences, not the measurements.
PROBES = Path(__file__).resolve().parent / "probes"


def probe(name: str) -> dict[str, Any]:
    """The record ``benchmarks/probes/<name>.json``."""
    record: dict[str, Any] = json.loads((PROBES / f"{name}.json").read_text())
    return record


class ProbeRecord:
    """The record ``benchmarks/probes/<name>.json`` of a probe as it runs: the probe's
    ``settings`` (its turn's length, its rounds), and the load average after each turn."""

    def __init__(self, name: str, doc: str, **settings: Any) -> None:
        self.name = name
        self.doc = doc
        self.settings = settings
        self.load: list[float] = []

    def turn_done(self) -> None:
        """Note the load average (of the last minute) after a turn."""
        self.load.append(os.getloadavg()[0])

    def write(self, server: str, **measured: Any) -> None:
        """Write the record and say where: what the probe measures (the second paragraph of
        its module's ``doc``), the day, the ``server``, the load average's range while it ran,
        its settings and what it ``measured``."""
        path = PROBES / f"{self.name}.json"
        record = {
            "about": self.doc.split("\n\n")[1].replace("\n", " "),
            "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
            "server": server,
            "load": [round(min(self.load), 1), round(max(self.load), 1)],
            **self.settings,
            **measured,
        }
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"written to {path}")


def day(iso: str) -> str:
    """A probe's ISO date as the page spells it: ``23 November 2026``."""
    value = datetime.date.fromisoformat(iso)
    return f"{value.day} {value:%B %Y}"


def rotated(items: Sequence[T], round_number: int) -> list[T]:
    """``items`` starting at a different one each round: interleaved runs, no fixed order."""
    shift = round_number % len(items)
    return [*items[shift:], *items[:shift]]


#: The keys the INSERTs that give one give (:func:`insert_rate`), unique over a run and above
#: every key a server makes here (sequences from 1, Snowflakes below 2**62).
GIVEN_KEYS = itertools.count(2**62)


def insert_rate(
    connections: Sequence[Any], table: str, seconds: float, *, column: str, given: bool = False
) -> float:
    """Rows per second of one-row INSERTs into ``table`` (a value for ``column``) for
    ``seconds``, a thread per open DB-API connection of ``connections``, with the key left out
    or ``given``; the threads start together, their connections already open."""
    counts = [0] * len(connections)
    start = time.monotonic() + 0.2

    def insert(index: int) -> None:
        cursor = connections[index].cursor()
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < start + seconds:
            if given:
                cursor.execute(
                    f"INSERT INTO `{table}` (id, {column}) VALUES ({next(GIVEN_KEYS)}, 1)"
                )
            else:
                cursor.execute(f"INSERT INTO `{table}` ({column}) VALUES (1)")
            counts[index] += 1

    threads = [threading.Thread(target=insert, args=(i,)) for i in range(len(connections))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def timed(function: Callable[[], object]) -> float:
    """Seconds ``function()`` took, after a full garbage collection."""
    gc.collect()
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def log(*words: object) -> None:
    print(time.strftime("%H:%M:%S"), *words, file=sys.stderr, flush=True)


def _first_line(command: Iterable[str]) -> str:
    try:
        out = subprocess.run(list(command), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""


def _lines(command: list[str]) -> list[str]:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.splitlines()


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import django

    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory_gb = round(pages / 2**30, 1)
    except (ValueError, OSError):
        pass
    versions: dict[str, str] = {
        "python": platform.python_version(),
        "django": django.__version__,
    }
    for module, name in (("psycopg", "psycopg"), ("MySQLdb", "mysqlclient")):
        try:
            imported = __import__(module)
            versions[name] = getattr(imported, "__version__", "") or ".".join(
                map(str, getattr(imported, "version_info", ())[:3])
            )
        except ImportError:
            pass
    import sqlite3

    versions["sqlite"] = sqlite3.sqlite_version
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": platform.platform(),
        "versions": versions,
        "commit": _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        # Files of the package that differ from that commit in the tree measured (a shared
        # working tree may hold someone's work in progress): none, when the commit is the code.
        "uncommitted_package_files": _lines(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "django_snowflake"]
        ),
        "load_average_at_start": os.getloadavg(),
    }
