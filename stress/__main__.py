"""``python -m stress [--quick] [--db sqlite|postgresql|mariadb|all] [--scenario ...]``.

Runs the chosen scenarios on the chosen databases, prints a summary of each, and exits
non-zero if any failed. ``--json PATH`` also writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .common import VENDORS, log

SCENARIOS = ("torture", "failover", "servers", "claims")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stress", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small version of each scenario")
    parser.add_argument("--db", default="all", choices=[*VENDORS, "all"])
    parser.add_argument("--scenario", default="all", choices=[*SCENARIOS, "all"])
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("--seed", type=int, help="seed of the chaos driver")
    parser.add_argument("--json", metavar="PATH", help="write the figures to this file")
    args = parser.parse_args(argv)

    vendors = VENDORS if args.db == "all" else (args.db,)
    scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
    results: list[dict[str, Any]] = []
    for scenario in scenarios:
        for vendor in vendors:
            started = time.monotonic()
            log(f"{scenario} on {vendor}{' (quick)' if args.quick else ''}")
            result = run(scenario, vendor, args)
            if result is None:
                continue
            result.update(
                scenario=scenario,
                quick=args.quick,
                wall_seconds=round(time.monotonic() - started, 1),
            )
            results.append(result)
            print(summary(result), flush=True)
            if args.json:
                with open(args.json, "w") as out:
                    json.dump(results, out, indent=2)
    failed = [f"{r['scenario']} on {r['database']}" for r in results if not r["passed"]]
    print("FAILED: " + ", ".join(failed) if failed else "All stress scenarios passed.")
    return 1 if failed else 0


def run(scenario: str, vendor: str, args: argparse.Namespace) -> dict[str, Any] | None:
    if scenario == "torture":
        from .torture import TortureConfig, run_torture

        config = TortureConfig.quick() if args.quick else TortureConfig()
        config.seed = args.seed
        return run_torture(vendor, config, keep=args.keep)
    if scenario == "failover":
        from .failover import FailoverConfig, run_failover

        return run_failover(
            vendor, FailoverConfig.quick() if args.quick else FailoverConfig(), keep=args.keep
        )
    if scenario == "servers":
        from .servers import ServersConfig, run_servers

        return run_servers(vendor, ServersConfig.quick() if args.quick else ServersConfig())
    from .claims import ClaimsConfig, run_claims

    return run_claims(vendor, ClaimsConfig.quick() if args.quick else ClaimsConfig.full(vendor))


def summary(result: dict[str, Any]) -> str:
    verdict = "PASS" if result["passed"] else "FAIL"
    lines = [
        f"\n== {result['scenario']} on {result['database']}: {verdict} "
        f"({result['wall_seconds']} s) =="
    ]
    for key, value in result.items():
        if key in {"scenario", "database", "passed", "wall_seconds"} or value in (None, [], {}):
            continue
        lines.append(f"  {key}: {value}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
