"""The text of ``docs/performance.rst``, built from a results file."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from . import bulk_load, concurrency, report
from .common import day, probe
from .report import DB_NAMES, DOCS, KEYS, NAMES, Target, _mb, _rate, chart, spread, table


def targets(results: dict[str, Any]) -> list[Target]:
    """(what, measured, target, met) for every target the results cover."""
    return report.targets(results) + bulk_load.targets(results) + concurrency.targets(results)


def target_lines(results: dict[str, Any]) -> list[str]:
    marks = {True: "met", False: "MISSED", None: "-"}
    return [
        f"{marks[met]:>6}  {what}: {measured} (target {goal})"
        for what, measured, goal, met in targets(results)
    ]


def _targets(results: dict[str, Any]) -> str:
    marks = {True: "met", False: "**missed**", None: "-"}
    rows = [[what, measured, goal, marks[met]] for what, measured, goal, met in targets(results)]
    return table(["target", "measured: median (min to max)", "goal", "result"], rows, "45 30 12 13")


def _generation(results: dict[str, Any]) -> str:
    generation = results["generation"]
    rates = generation["rates"]
    rows = []
    for name in ("generate", "naive", "uuid4", "uuid7"):
        label = {
            "generate": "``django_snowflake.generate()``",
            "naive": "naive Snowflake (lock + ``time.time_ns()`` + sequence)",
            "uuid4": "``uuid.uuid4()``",
            "uuid7": "UUIDv7 (CPython 3.14's algorithm)",
        }[name]
        rows.append([label, *(spread(rates[f"{name}@{t}"], "{:,.0f}") for t in (1, 2, 4))])
    rows.append(
        [
            "``generate_many(10_000)``",
            spread(generation["generate_many"], "{:,.0f}"),
            "",
            "",
        ]
    )
    rows.append(
        [
            "the layout's bit-space limit (twitter: 4,096 IDs per ms)",
            f"{generation['layout_limit_ids_per_second']:,}",
            "",
            "",
        ]
    )
    return table(["IDs per second", "1 thread", "2 threads", "4 threads"], rows, "40 20 20 20")


def _construction(results: dict[str, Any]) -> str:
    construction = results["construction"]
    rows = [
        [
            NAMES[key],
            spread(construction["instances_per_second"][key], "{:,.0f}"),
            spread(construction["microseconds"][key], "{:.2f}"),
            ""
            if key == "bigauto"
            else spread(construction["extra_microseconds_vs_bigauto"][key], "{:+.2f}"),
        ]
        for key in KEYS
    ]
    return table(
        ["model", "instances per second", "µs per instance", "µs more than BigAutoField"],
        rows,
    )


def _inserts(results: dict[str, Any]) -> str:
    inserts = results["inserts"]
    parts = []
    for db in ("sqlite", "postgresql", "mariadb"):
        if db not in inserts:
            continue
        for kind, title in (
            ("bulk", "bulk_create"),
            ("bulk_preloaded", "bulk_create into a table holding {preloaded:,} rows"),
            ("create", "single-row create()"),
        ):
            section = inserts[db].get(kind)
            if not section:
                continue
            heading = title.format(preloaded=section.get("preloaded_rows", 0))
            keys = section["keys"]
            sized = "sizes" in keys["bigauto"]
            header = ["key", "rows per second", "vs SnowflakeModel"]
            if sized:
                header += ["pk index (MiB)", "table (MiB)", "total (MiB)"]
            rows = []
            for key in keys:
                ratio = (
                    ""
                    if key == "snowflake"
                    else spread(section["ratios"][f"snowflake/{key}"], "{:.2f}x")
                )
                row = [NAMES[key], _rate(keys[key]["rows_per_second"]), ratio]
                if sized:
                    row += [_mb(keys[key]["sizes"][p]) for p in ("pk_index", "table", "total")]
                rows.append(row)
            parts.append(
                f"**{DB_NAMES[db]}, {heading}** ({section['rows']:,} rows, "
                f"{section['runs']} runs)\n\n" + table(header, rows)
            )
    return "\n".join(parts)


def _claims(results: dict[str, Any]) -> str:
    claims = results["claims"]
    herds = claims["herds"]
    header = ["database", "first claim (ms)"]
    for size in herds:
        header += [f"herd of {size}: median claim (ms)", f"herd of {size}: slowest (ms)"]
    rows = []
    for db, entry in claims["databases"].items():
        row = [DB_NAMES[db], spread(entry["first_claim_ms"], "{:.1f}")]
        for size in herds:
            herd = entry[f"herd_{size}"]
            row += [
                spread(herd["median_claim_ms"], "{:.0f}"),
                spread(herd["slowest_claim_ms"], "{:.0f}"),
            ]
        rows.append(row)
    failures = [
        f"{DB_NAMES[db]}, herd of {size}: {entry[f'herd_{size}']['failed_claims']}"
        for db, entry in claims["databases"].items()
        for size in herds
        if entry[f"herd_{size}"].get("failed_claims")
    ]
    note = (
        "\nClaimants that failed (not counted above): " + "; ".join(failures) + ".\n"
        if failures
        else ""
    )
    return table(header, rows) + note


def _machine(results: dict[str, Any]) -> str:
    meta = results["machine"]
    versions = ", ".join(f"{name} {version}" for name, version in meta["versions"].items())
    servers = results.get("servers", {})
    lines = [
        f"- **Date**: {meta['date']} (commit ``{meta['commit']}``); the whole run took "
        f"{results['duration_seconds'] / 60:.0f} minutes"
        + (
            " ("
            + ", ".join(
                f"{name} {seconds / 60:.0f}" for name, seconds in results["section_seconds"].items()
            )
            + ")."
            if results.get("section_seconds")
            else "."
        ),
        f"- **Machine**: {meta['cpu']}, {meta['cores']} cores, {meta['memory_gb']} GiB, "
        f"{meta['os']}; load average {meta['load_average_at_start'][0]:.1f} at the start, "
        f"{meta['load_average_at_end'][0]:.1f} at the end.",
        f"- **Versions**: {versions}.",
    ]
    for db, facts in servers.items():
        described = ", ".join(f"{key} {value}" for key, value in facts.items())
        lines.append(f"- **{DB_NAMES[db]}**: {described}.")
    return "\n".join(lines) + "\n"


HEAD = """\
Performance
===========

.. The numbers on this page are written by ``python -m benchmarks`` (a full run) from
   ``benchmarks/results/latest.json``; edit ``benchmarks/page.py``, not this file.

How fast a Snowflake key is next to the alternatives, measured in one run on one machine: every figure is a ratio to a baseline measured in the same run, because absolute numbers move with the machine and its load.
Each figure is the median of interleaved runs, with the minimum and maximum in brackets (``median (min to max)``).

Run the benchmarks
------------------

From a checkout, with PostgreSQL and MariaDB reachable as for the test suite::

    pip install -e '.[bench]'
    python -m benchmarks            # the full run: rewrites this page
    python -m benchmarks --quick    # a smoke run: rows scaled down 20-100x

``--only generation construction inserts claims`` runs some sections, ``--databases sqlite postgresql mariadb`` some databases.
The runner creates its own databases (``snowflake_bench`` on each server, SQLite files in a temporary directory) and drops them at the end; results go to ``benchmarks/results/`` as JSON.
The benchmarks are not part of the test suite.

"""


def render(results: dict[str, Any], page: Path = DOCS / "performance.rst") -> None:
    """Rewrite ``docs/performance.rst`` and its chart from ``results``."""
    chart(results)
    page.write_text(build(results))


def build(results: dict[str, Any]) -> str:
    sizes = results["sizes"]
    parts = [
        HEAD,
        "Results\n-------\n\n",
        _machine(results),
        "\n.. image:: _static/performance.png\n   :alt: Bar charts of the results below\n\n",
        "Targets\n~~~~~~~\n\n",
        _targets(results),
        "\n",
        NOTES.format(**sizes),
        _analysis(results),
    ]
    sections = (
        ("generation", "Generation", GENERATION_TEXT, _generation),
        ("construction", "Model construction", CONSTRUCTION_TEXT, _construction),
        ("inserts", "Inserts", INSERTS_TEXT, _inserts),
        ("claims", "Worker claims", CLAIMS_TEXT, _claims),
        ("bulk_load", "bulk_load", bulk_load.TEXT, bulk_load.render),
        # Its text is its render's: the run's sizes and the goal.
        ("concurrency", CONCURRENCY, "", concurrency.render),
    )
    for key, title, text, render in sections:
        if key in results:
            parts += [f"\n{title}\n{'~' * len(title)}\n\n", text.format(**sizes), render(results)]
    parts += ["\n", _optimisations()]
    return "".join(parts)


CONCURRENCY = "Concurrent inserts"
#: The heading of the part of the page after the sections.
AFTER_SECTIONS = "\nWhat was optimised\n~~~~~~~~~~~~~~~~~~\n"
#: Titles of the sections that a run of their own rewrites in the page (``splice``).
SPLICED_TITLES = {"concurrency": CONCURRENCY}


def splice(results: dict[str, Any], section: str, page: Path = DOCS / "performance.rst") -> None:
    """Rewrite one section of ``docs/performance.rst`` from ``results`` (a run of that section
    alone), as a full run's ``build()`` writes it, leaving the rest of the page as it is."""
    title = SPLICED_TITLES[section]
    text = page.read_text()
    heading = f"\n{title}\n{'~' * len(title)}\n"
    end = text.index(AFTER_SECTIONS)
    start = text.index(heading) if heading in text else end
    body = {"concurrency": concurrency.render}[section](results)
    page.write_text(text[:start] + heading + "\n" + body + text[end:])


def _ratio(section: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    return None if section is None else section.get("ratios", {}).get(name)


def _paired(section: dict[str, Any], key: str, baseline: str) -> float:
    """The median over runs of ``key``'s rate over ``baseline``'s in the same run."""
    keys = section["keys"]
    runs = zip(
        keys[key]["rows_per_second"]["runs"],
        keys[baseline]["rows_per_second"]["runs"],
        strict=True,
    )
    return statistics.median(ours / theirs for ours, theirs in runs)


NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
)


def _item(sentences: list[str]) -> str:
    """A list item one sentence per line (continuations indented under the item's text), so
    the generated page changes by lines as its figures do."""
    return "- " + "\n  ".join(sentences)


def _create_probe() -> str:
    record = probe("create")
    return (
        f"A probe of the database's side alone ({day(record['date'])}, autocommit, the four variants "
        f"in turns of {record['turn_rows']:,} rows, medians of {record['runs']} runs of "
        f"{record['rows']:,}): a bare ``INSERT ... RETURNING id`` into the ``BigAutoField`` table "
        f"took {record['insert_returning_us']} µs, a bare ``INSERT`` of a Snowflake row "
        f"{record['insert_us']} µs, so all a database-made key costs is "
        f"{record['database_key_us']} µs a row ({record['database_key_ratio']:.2f}x); Django's "
        f"``create()`` added {record['create_adds_us']['bigauto']} µs to the first and "
        f"{record['create_adds_us']['snowflake']} µs to the second (one more value through "
        "Django's compiler and psycopg's quoting, and an ID that at this rate is nearly always "
        "the first of its millisecond, which takes ``generate()``'s locked path: "
        f"{record['generate_us']['first_of_millisecond']} µs, against "
        f"{record['generate_us']['same_millisecond']} µs for the next ID of the same "
        "millisecond)."
    )


def _analysis(results: dict[str, Any]) -> str:
    """Why a missed target is missed, from the numbers of the same run."""
    notes: list[list[str]] = []
    generation = results.get("generation")
    if generation:
        ratio = generation["ratios"]["generate/naive@2"]
        limit = generation["layout_limit_ids_per_second"]
        naive = generation["rates"]["naive@2"]["median"]
        ours = generation["rates"]["generate@2"]["median"]
        if ratio["median"] < 2:
            share = 2 * naive / limit
            notes.append(
                [
                    "**Two threads.** The naive generator did not collapse under contention "
                    f"here: {naive:,.0f} IDs/s with two threads.",
                    f"Twice that is {2 * naive:,.0f}/s, {share:.0%} of the twitter layout's "
                    f"bit-space limit of {limit:,}/s (4,096 sequence values per millisecond per "
                    "worker): "
                    + (
                        "no correct generator on one worker can reach it, whatever it costs per "
                        "call."
                        if share > 1
                        else "within the limit, but above what one CPython interpreter issues: "
                        "the GIL lets one thread run at a time, so two threads share one core's "
                        "rate."
                    ),
                    "``generate()`` keeps its single-threaded rate under contention "
                    f"({ours:,.0f}/s with two threads, {ratio['median']:.2f}x the naive one): "
                    "its fast path takes no lock, so threads do not queue for one.",
                ]
            )
    inserts = results.get("inserts", {})
    postgresql = inserts.get("postgresql", {})
    bulk = postgresql.get("bulk")
    vs_bigauto = _ratio(bulk, "snowflake/bigauto")
    control = _ratio(bulk, "control/bigauto")
    if vs_bigauto and vs_bigauto["median"] < 0.95:
        note = [
            f"**PostgreSQL bulk_create against BigAutoField** ({vs_bigauto['median']:.2f}x).",
            "A ``BigAutoField`` key is made by the server and comes back through ``RETURNING``; "
            "a Snowflake key is made in Python and sent, and Django prepares every value it "
            "sends through a chain of calls per row and column, then psycopg writes it into the "
            "``UNNEST`` array as text.",
        ]
        if control:
            note.append(
                "The control model (the same ``BigAutoField`` table plus one ``SnowflakeField`` "
                f"column) loads at {control['median']:.2f}x ``BigAutoField``: sending one "
                "application-made 8-byte value costs that much, whatever the column; "
                f"SnowflakeModel is at {_ratio(bulk, 'snowflake/control')['median']:.2f}x the "
                "control."
            )
        note.append(
            "The field's own part of that chain is one call, which returns the ``int`` as it "
            "is (see What was optimised); the rest is Django's compiler (``pre_save``, "
            "``prepare_value``, ``get_db_prep_save`` per value) and psycopg's writing of the "
            "array, outside this package, while ``RETURNING`` costs ``BigAutoField`` a few "
            "tenths of a microsecond per row (cProfile of a 100,000-row load)."
        )
        notes.append(note)
    create = postgresql.get("create")
    create_ratio = _ratio(create, "snowflake/bigauto")
    if create and create_ratio and create_ratio["median"] < 1.15:
        micros = {
            key: 1e6 / create["keys"][key]["rows_per_second"]["median"]
            for key in ("bigauto", "snowflake", "raw")
        }
        notes.append(
            [
                f"**PostgreSQL single-row create()** ({create_ratio['median']:.2f}x).",
                "Each ``create()`` is a transaction of its own, whose commit waits for the WAL "
                "to reach the disk, wrapped in Django's ``save()``.",
                f"Per row in this run: ``BigAutoField`` {micros['bigauto']:.0f} µs, "
                f"SnowflakeModel {micros['snowflake']:.0f} µs, and SnowflakeModel's row through "
                f"a bare cursor {micros['raw']:.0f} µs.",
                "The two keys take the same path through ``save()`` but for the key: "
                "``BigAutoField``'s ``INSERT`` has the server draw it from a sequence and send it "
                "back (``RETURNING id``), which Django reads into the instance; SnowflakeModel's "
                "sends one more parameter, made by ``generate()``.",
                _create_probe(),
                "1.15x needs SnowflakeModel's ``create()`` "
                f"{micros['bigauto'] - micros['bigauto'] / 1.15:.0f} µs below ``BigAutoField``'s, "
                "more than all a database-made key costs: out of reach without skipping work of "
                "``save()`` that every key needs.",
            ]
        )
    sqlite = inserts.get("sqlite", {}).get("bulk")
    sqlite_ratio = _ratio(sqlite, "snowflake/bigauto")
    if sqlite_ratio and sqlite_ratio["median"] < 0.95:
        keys = sqlite["keys"]
        notes.append(
            [
                f"**SQLite bulk_create** ({sqlite_ratio['median']:.2f}x).",
                "An ``integer PRIMARY KEY`` (``BigAutoField``) is SQLite's rowid: the table is "
                "one B-tree in key order.",
                "A ``bigint PRIMARY KEY`` is not, so the table keeps a second B-tree for the key "
                f"({_mb(keys['snowflake']['sizes']['pk_index'])} MiB here, none for "
                "``BigAutoField``) and every insert writes both.",
                "Declaring the key ``integer`` would make it the rowid, but SQLite then makes up "
                "a key for an ``INSERT`` that omits it, and this package promises that the "
                "database never makes keys (the migration tests check it), so the field does not "
                "do it.",
                "A ``WITHOUT ROWID`` table would have neither cost, but that is an option of the "
                "table, not of a field.",
            ]
        )
    for name, goal in (("uuid7", 1.2), ("uuid4", 1.6)):
        for kind, label in (("bulk", "an empty table"), ("bulk_preloaded", "5M rows")):
            section = postgresql.get(kind)
            ratio = _ratio(section, f"snowflake/{name}")
            if not (section and ratio and ratio["median"] < goal):
                continue
            free = _paired(section, "bigauto", name)
            notes.append(
                [
                    f"**PostgreSQL bulk_create against {NAMES[name]}, {label}** "
                    f"({ratio['median']:.2f}x, goal {goal}x).",
                    "The UUID loads pay for the UUID in Python (generating it, then Django and "
                    "psycopg handling a ``UUID`` object) and for a 16-byte key; "
                    + (
                        "at this size their index still fits in ``shared_buffers``, so random "
                        "insert positions cost little I/O, and the gap is mostly the client's."
                        if kind == "bulk"
                        else "the gap is what remains after the shared costs of the ORM, "
                        "which every key pays."
                    ),
                    f"Even ``BigAutoField``, whose key costs the client nothing, loads at "
                    f"{free:.2f}x {NAMES[name]} in this run: for SnowflakeModel to reach "
                    f"{goal}x, it would have to load {goal / free:.2f}x as fast as "
                    "``BigAutoField`` while sending one more column."
                    if goal > free
                    else f"``BigAutoField`` loads at {free:.2f}x {NAMES[name]} in this run, so "
                    f"{goal}x needs SnowflakeModel at {goal / free:.2f}x ``BigAutoField``: this "
                    "miss is the gap to ``BigAutoField`` explained above.",
                ]
            )
    if not notes:
        return ""
    return "Targets not reached, and why:\n\n" + "\n".join(map(_item, notes)) + "\n\n"


NOTES = """\
How the figures are taken: every section interleaves its variants (each round runs each variant once, in an order rotated from round to round) and every ratio is taken inside a round, then summarised over the rounds, so that a burst of load from elsewhere on the machine falls on both sides of a ratio.
Generation and construction: {micro_rounds} rounds.
Inserts go further, because one key's load lasts from seconds to minutes, long enough for the machine to change speed under it: within a run the keys take turns, each loading a chunk of its rows (50,000 for a bulk load, 500 single-row creates) before the next key's turn, until every key has loaded them all, and a key's rate is its rows over the time of its own chunks.
Bulk loads: {bulk_runs} runs of {bulk_rows:,} rows per key and database; single-row creates: {create_runs} runs of {create_rows:,} rows; the load into preloaded tables: {preloaded_runs} runs; claims: {claim_runs} runs.

"""

GENERATION_TEXT = """\
``generate()`` runs as a field default runs it: the process-local generator with the ``database`` allocator, its worker slot claimed before the timing starts (the claim is timed on its own below), with every safety check on: the lease limit, the ``wait`` rollback policy, the fork hook, a lock wherever the state changes.
The naive Snowflake (``benchmarks/baselines.py``) is the textbook algorithm: a lock around ``time.time_ns()`` and a 12-bit sequence, and none of those checks.
Threads share {calls:,} calls; ``generate_many(10_000)`` is called {batches} times in a row (a rate slightly above the limit is the fencepost of a short measurement: its first time unit is issued without a wait).
After the claim, no ID costs a query: the runner counts every query any thread sends while it generates 200,000 IDs.

"""

CONSTRUCTION_TEXT = """\
``Model(value=i, label=...)``, {instances:,} times per round, for models whose key is the first field (as the implicit ``id`` is: Django pops each field from the keyword arguments while any are left, so a key declared last would skip a ``KeyError`` that a real model pays).
The extra cost over ``BigAutoField`` is the key's default: ``generate()``, ``uuid4()`` or the UUIDv7 function, against Django's ``return_None``.

"""

INSERTS_TEXT = """\
The four tables have the same payload (an ``IntegerField`` and a ``CharField(max_length=32)``) and differ only in their key: ``BigAutoField``, ``SnowflakeModel`` (a ``bigint`` the application fills), ``UUIDField(default=uuid.uuid4)`` and ``UUIDField(default=uuid7)``.
Every run starts from empty tables, created for it (or from a file copy of a database of preloaded ones); the rate counts building the instances (where the Snowflake and UUID keys are generated) and the insert.
Each chunk of a bulk load is one ``bulk_create(objs, batch_size=5000)``, run as Django runs it: in one transaction, with ``INSERT ... SELECT * FROM UNNEST(...)`` on PostgreSQL (Django 5.2), ``RETURNING`` the ``BigAutoField`` keys on PostgreSQL, MariaDB and SQLite, and batches capped at 333 rows on SQLite (999 query parameters).
``create()`` runs in autocommit, one transaction per row, so on the servers each row waits for its commit to reach the disk (``fsync``, ``synchronous_commit`` and ``innodb_flush_log_at_trx_commit`` are on, as shipped).
Sizes are bytes on disk after a run: PostgreSQL's heap and primary key index; on MariaDB the table *is* its clustered primary key index (InnoDB), so both columns show ``data_length``; on SQLite a ``BigAutoField`` is the rowid and has no separate index, while a ``bigint`` or ``char(32)`` key has one.
The preloaded table holds {preload_rows:,} rows written in key order (four other workers' IDs, or UUIDv7s, one per millisecond up to the run; random uuid4s), vacuumed and analysed.

"""

CLAIMS_TEXT = """\
Each claimant is a fresh interpreter (``benchmarks/claim_process.py``, which claims as the test suite's children do, through ``harness/child.py``): it sets Django up, waits for a barrier file, claims its worker slot through the ``WorkerNode`` table and reports the time the claim took (opening its own connection and the round trips of the compare-and-set; the database driver is imported before the barrier, the interpreter's start is not counted), then holds the slot until every claimant has one.
A herd is that many claimants released together, as a fleet restarting at once; the table is emptied before each run.
The first claim is a single claimant on an empty table.

"""

OPTIMISATIONS = """\
What was optimised
~~~~~~~~~~~~~~~~~~

Profiled with ``cProfile`` and per-call timings, then changed in the product, with every safety property kept (the lease limit check, the rollback policies, fork safety, no ID given twice across threads) and the test suite passing on the three databases:

- ``generate()`` imported ``django_snowflake.runtime`` on every call (an ``import`` statement costs about as much as the whole generator); it now keeps a reference to the module and reads the current generator from it, so settings changes and resets are still seen.
- ``next_id()`` keeps a *window*: the nanosecond range of the current time unit and an iterator over the rest of that unit's sequence.
  The common case compares ``time.time_ns()`` with the window and takes ``next()`` of the iterator, with no arithmetic on the time and no lock: a single call into C, which no other thread can interleave while it holds the GIL (on a free-threaded interpreter the window never opens, and every ID takes the lock).
  Anything else (a new unit, a spent sequence, the clock behind, no lease, an injected clock) takes the full path under the lock, which first replaces the iterator and then counts what is left of it; a caller that took an ID from a replaced iterator drops it and takes the full path too, so no ID escapes the count.
  The window never outlives the unit, the lease (revoking or losing it closes the window) or the sequence.
  Contending threads no longer queue on a lock (the naive generator, which reads the clock under its lock, convoys).
  ``tests/test_concurrency.py`` runs it with threads switched every microsecond, also with a take that yields to other threads between loading the iterator and ``next()``.
- ``SnowflakeField`` and ``SnowflakeAutoField`` make ``get_default`` ``generate`` itself while the default is theirs: ``Model.__init__`` calls it for every instance, and Django's own goes through ``_get_default()`` first.
- A spent sequence waited ``max(target - now, 1)`` whole milliseconds from a clock truncated to the millisecond, overshooting the next unit by up to a unit: ``generate_many`` lost up to half the layout's capacity.
  It now waits (spinning, as before, for the last millisecond) until the next unit's first nanosecond.
- ``get_db_prep_save()`` of both fields returns an ``int`` as it is, skipping three generic calls that return it unchanged, and the backend's integer adapter: on PostgreSQL with psycopg 3 that adapter wraps every value in a new psycopg ``Int8`` object, {int8_gc_off} µs per value with the garbage collector off and {int8_gc_on} µs with it on beside {live_objects:,} live objects (every new ``Int8`` is tracked, so a load of a million of them runs more collections, each walking the load's instances); psycopg writes an array of either as fast ({array_ms} ms per {array_values:,} values).
  The wrapper pins a parameter's type, which matters for lookups (they keep it: they go through ``get_db_prep_value``), not for a value stored into a ``bigint`` column, which PostgreSQL widens from any smaller integer type.
  ``tests/test_fields.py`` stores and reads back keys from ``-2**63`` to ``2**63 - 1``, small ones too, through ``save()``, ``bulk_create()``, ``bulk_update()`` and ``update()``, with client-side and server-side binding.
  PostgreSQL ``bulk_create``, SnowflakeModel against ``BigAutoField``, medians of {ab_runs} interleaved runs of {ab_rows:,} rows, {ab_date}: {with_wrapper} with the wrapper, {without} without ({probe_runs} runs of the probe each way).

Before and after, measured back to back with ``--quick`` on {before_after_date} (a record of that change, not rewritten by later runs):

"""


def _optimisations() -> str:
    """What was optimised, with the figures of its probes and its before-and-after record."""
    int8 = probe("int8_wrapper")
    ab = int8["bulk_create"]
    before_after = probe("before_after")
    text = OPTIMISATIONS.format(
        int8_gc_off=int8["int8_us"]["gc_off"],
        int8_gc_on=int8["int8_us"]["gc_on"],
        live_objects=int8["int8_us"]["live_objects"],
        array_ms=" and ".join(map(str, int8["array_ms"]["either"])),
        array_values=int8["array_ms"]["values"],
        ab_runs=NUMBER_WORDS[ab["runs"]],
        ab_rows=ab["rows"],
        ab_date=day(ab["date"]),
        with_wrapper=" and ".join(f"{ratio:.3f}x" for ratio in ab["with_wrapper"]),
        without=" and ".join(f"{ratio:.3f}x" for ratio in ab["without"]),
        probe_runs=NUMBER_WORDS[len(ab["without"])],
        before_after_date=day(before_after["date"]),
    )
    rows = [
        [row["label"], spread(row["before"], row["format"]), spread(row["after"], row["format"])]
        for row in before_after["rows"]
    ]
    return text + table(["", "before", "after"], rows, "40 30 30")
