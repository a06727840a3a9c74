"""A results file's targets check and chart, and the formatting that ``page.py`` (which
writes ``docs/performance.rst``) uses: this module imports nothing of the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import ROOT

DOCS = ROOT / "docs"
CHART = DOCS / "_static" / "performance.png"
KEYS = ("bigauto", "snowflake", "uuid4", "uuid7")
NAMES = {
    "bigauto": "BigAutoField",
    "snowflake": "SnowflakeModel",
    "uuid4": "UUIDField uuid4",
    "uuid7": "UUIDField UUIDv7",
    "control": "control: BigAutoField + SnowflakeField column",
    "raw": "floor: bare-cursor INSERT of SnowflakeModel's rows",
    "naive": "naive Snowflake",
    "generate": "generate()",
}
DB_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mariadb": "MariaDB"}


def spread(entry: dict[str, Any], fmt: str = "{:.2f}", scale: float = 1) -> str:
    """``median (min to max)`` of a summary."""
    median, low, high = (entry[k] * scale for k in ("median", "min", "max"))
    return f"{fmt.format(median)} ({fmt.format(low)} to {fmt.format(high)})"


Target = tuple[str, str, str, bool | None]


def at_least(
    what: str,
    entry: dict[str, Any] | None,
    goal: float | None,
    fmt: str = "{:.2f}x",
    goal_fmt: str = "{}x",
    judged: bool = True,
) -> Target:
    """(what, measured, target, met) for a summary whose median should reach ``goal``.

    ``fmt`` writes the measured spread and ``goal_fmt`` the goal; with no goal the target is
    ``-``. A cross-check (``judged=False``) shows its goal but is neither met nor missed, and
    so is a missing ``entry``, which measured nothing.
    """
    measured = "" if entry is None else spread(entry, fmt)
    target = "-" if goal is None else f">= {goal_fmt.format(goal)}"
    met = None if goal is None or entry is None or not judged else entry["median"] >= goal
    return what, measured, target, met


def targets(results: dict[str, Any]) -> list[Target]:
    """(what, measured, target, met) for the targets of generation and inserts (the
    bulk_load section judges its own: ``page.targets`` joins the two)."""
    rows: list[Target] = []
    generation = results.get("generation")
    if generation:
        ratios = generation["ratios"]
        naive = generation["rates"]["naive@2"]
        limit = generation["layout_limit_ids_per_second"]
        share_of_limit = {k: 2 * naive[k] / limit for k in ("median", "min", "max")}
        rows += [
            at_least("generate() vs naive Snowflake, 1 thread", ratios["generate/naive@1"], 1.3),
            at_least(
                "the same, in CPU time per ID (check)",
                ratios.get("cpu: naive/generate@1"),
                1.3,
                judged=False,
            ),
            at_least(
                "generate() vs naive Snowflake, 2 threads contending", ratios["generate/naive@2"], 2
            ),
            at_least(
                "2x the naive Snowflake's 2-thread rate, as a share of the layout's limit "
                "(above 100%: no correct generator can reach 2x)",
                share_of_limit,
                None,
                "{:.0%}",
            ),
            at_least(
                "generate_many(10_000) vs the layout's limit (4,096,000/s)",
                ratios["generate_many/limit"],
                0.95,
                "{:.1%}",
                "{:.0%}",
            ),
        ]
        if "generate+metrics/limit@1" in ratios:  # runs since the metrics (issue 33)
            rows += [
                at_least(
                    "generate(), 1 thread, vs the layout's limit: metrics off",
                    ratios["generate/limit@1"],
                    0.95,
                    "{:.1%}",
                    "{:.0%}",
                ),
                at_least(
                    "the same with the Prometheus metrics on",
                    ratios["generate+metrics/limit@1"],
                    0.95,
                    "{:.1%}",
                    "{:.0%}",
                ),
                at_least(
                    "generate_many(10_000) with the metrics on vs the layout's limit",
                    ratios["generate_many+metrics/limit"],
                    0.95,
                    "{:.1%}",
                    "{:.0%}",
                ),
            ]
        queries = generation["queries_after_claim"]
        rows.append(
            (
                "database queries per ID after the claim",
                f"{queries['queries']} in {queries['ids']:,} IDs",
                "0",
                queries["queries"] == 0,
            )
        )
    construction = results.get("construction")
    if construction:
        extra = construction["extra_microseconds_vs_bigauto"]["snowflake"]
        rows.append(
            (
                "SnowflakeModel instance, extra cost over BigAutoField",
                spread(extra, "{:.2f} µs"),
                "<= 0.4 µs",
                extra["median"] <= 0.4,
            )
        )
        cpu = construction.get("extra_cpu_microseconds_vs_bigauto", {}).get("snowflake")
        if cpu:
            rows.append(
                (
                    "the same, in CPU time (check)",
                    spread(cpu, "{:.2f} µs"),
                    "<= 0.4 µs",
                    None,
                )
            )
    inserts = results.get("inserts", {})
    checks = [
        ("postgresql", "bulk", "bigauto", 0.95, "PostgreSQL bulk_create vs BigAutoField"),
        (
            "postgresql",
            "bulk_preloaded",
            "bigauto",
            0.95,
            "PostgreSQL bulk_create into 5M rows vs BigAutoField",
        ),
        ("postgresql", "bulk", "uuid7", 1.2, "PostgreSQL bulk_create vs UUIDv7"),
        ("postgresql", "bulk", "uuid4", 1.6, "PostgreSQL bulk_create vs uuid4"),
        (
            "postgresql",
            "bulk",
            "control/bigauto",
            None,
            "PostgreSQL bulk_create, control (BigAutoField + SnowflakeField column) vs BigAutoField",
        ),
        (
            "postgresql",
            "bulk_preloaded",
            "uuid7",
            1.2,
            "PostgreSQL bulk_create into 5M rows vs UUIDv7",
        ),
        (
            "postgresql",
            "bulk_preloaded",
            "uuid4",
            1.6,
            "PostgreSQL bulk_create into 5M rows vs uuid4",
        ),
        ("postgresql", "create", "bigauto", 1.15, "PostgreSQL single-row create() vs BigAutoField"),
        (
            "postgresql",
            "create",
            "raw/bigauto",
            None,
            "PostgreSQL bare-cursor INSERT (the floor) vs BigAutoField create()",
        ),
        ("sqlite", "bulk", "bigauto", 0.95, "SQLite bulk_create vs BigAutoField"),
        ("sqlite", "create", "bigauto", None, "SQLite single-row create() vs BigAutoField"),
        ("mariadb", "bulk", "bigauto", None, "MariaDB bulk_create vs BigAutoField"),
        ("mariadb", "bulk", "uuid7", None, "MariaDB bulk_create vs UUIDv7"),
        ("mariadb", "bulk", "uuid4", None, "MariaDB bulk_create vs uuid4"),
        ("mariadb", "create", "bigauto", None, "MariaDB single-row create() vs BigAutoField"),
    ]
    for db, kind, other, goal, label in checks:
        section = inserts.get(db, {}).get(kind)
        if not section:
            continue
        name = other if "/" in other else f"snowflake/{other}"
        if name not in section["ratios"]:
            continue
        rows.append(at_least(label, section["ratios"][name], goal))
    return rows


# The docs page.


def table(header: list[str], rows: list[list[str]], widths: str | None = None) -> str:
    lines = [".. list-table::", "   :header-rows: 1"]
    if widths:
        lines.append(f"   :widths: {widths}")
    lines.append("")
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines) + "\n"


def _mb(entry: dict[str, Any]) -> str:
    return f"{entry['median'] / 2**20:.1f}"


def _rate(entry: dict[str, Any]) -> str:
    return spread(entry, "{:,.0f}")


def chart(results: dict[str, Any], path: Path = CHART) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"bigauto": "#888888", "snowflake": "#1f77b4", "uuid4": "#d62728", "uuid7": "#ff7f0e"}
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))

    def bars(
        ax: Any,
        groups: list[str],
        series: dict[str, list[dict[str, Any] | None]],
        color: dict[str, str],
        scale: float = 1,
    ) -> None:
        width = 0.8 / len(series)
        for n, (name, entries) in enumerate(series.items()):
            xs, ys, low, high = [], [], [], []
            for g, entry in enumerate(entries):
                if entry is None:
                    continue
                xs.append(g + (n - (len(series) - 1) / 2) * width)
                ys.append(entry["median"] * scale)
                low.append((entry["median"] - entry["min"]) * scale)
                high.append((entry["max"] - entry["median"]) * scale)
            ax.bar(
                xs,
                ys,
                width,
                yerr=[low, high],
                capsize=2,
                label=NAMES.get(name, name),
                color=color.get(name),
            )
        ax.set_xticks(range(len(groups)), groups)
        ax.grid(axis="y", alpha=0.3)

    generation = results.get("generation")
    ax = axes[0][0]
    if not generation:
        ax.set_visible(False)
    else:
        rates = generation["rates"]
        series = {
            name: [rates[f"{name}@{t}"] for t in (1, 2, 4)]
            for name in ("naive", "generate", "uuid4", "uuid7")
        }
        bars(
            ax,
            ["1 thread", "2 threads", "4 threads"],
            series,
            {"naive": "#888888", "generate": "#1f77b4", "uuid4": "#d62728", "uuid7": "#ff7f0e"},
            scale=1e-6,
        )
        limit = generation["layout_limit_ids_per_second"] / 1e6
        ax.axhline(limit, color="black", linestyle="--", linewidth=1)
        many = generation["generate_many"]["median"] / 1e6
        ax.text(
            2.45,
            limit,
            f"bit-space limit {limit:.3f}M/s\ngenerate_many: {many:.2f}M/s",
            ha="right",
            va="bottom",
            fontsize=8,
        )
        ax.set_ylabel("million IDs per second")
        ax.set_title("ID generation")
        ax.legend(fontsize=8, loc="center right")

    inserts = results.get("inserts", {})
    panels: dict[str, tuple[list[str], list[dict[str, Any]]]] = {
        "bulk": ([], []),
        "create": ([], []),
        "index": ([], []),
    }
    for db in ("sqlite", "postgresql", "mariadb"):
        if db not in inserts:
            continue
        for panel, kind in (("bulk", "bulk"), ("create", "create"), ("index", "bulk")):
            panels[panel][0].append(DB_NAMES[db])
            panels[panel][1].append(inserts[db][kind]["keys"])
        if "bulk_preloaded" in inserts[db]:
            panels["bulk"][0].append("PostgreSQL\n+5M rows")
            panels["bulk"][1].append(inserts[db]["bulk_preloaded"]["keys"])
    for ax, panel, title, unit, scale in (
        (axes[0][1], "bulk", "bulk_create, rows per second", "thousand rows/s", 1e-3),
        (axes[1][0], "create", "single-row create(), rows per second", "rows/s", 1),
        (axes[1][1], "index", "primary key index after the bulk load", "MiB", 2**-20),
    ):
        groups, data = panels[panel]
        if not groups:
            ax.set_visible(False)
            continue
        series = {
            key: [
                entry[key]["sizes"]["pk_index"]
                if panel == "index"
                else entry[key]["rows_per_second"]
                for entry in data
            ]
            for key in KEYS
        }
        bars(ax, groups, series, colors, scale=scale)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.legend(fontsize=8)
    meta = results["machine"]
    fig.suptitle(
        f"django_snowflake benchmarks, {meta['date'][:10]}, {meta['cores']} cores "
        f"({meta['cpu']}); bars: median, whiskers: min-max",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
