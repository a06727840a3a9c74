"""A process that reports every signal of the package it receives, for tests/test_signals.py:
``python -m tests.signals_process --go FILE``.

It runs on the database named by the environment (as ``tests.worker_process``), claims its
slot, then generates an ID every 10 ms until ``--go`` exists, printing ``claimed WORKER`` and
then one line per signal: ``signal NAME`` and its arguments as JSON (the simple ones).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from harness.child import claim, report

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--go", required=True)
    args = parser.parse_args()
    import django

    django.setup()
    from django_snowflake import generate, signals
    from django_snowflake.exceptions import WorkerLeaseLost

    def receiver(name: str) -> Any:
        def heard(**kwargs: Any) -> None:
            facts = {
                key: value
                for key, value in kwargs.items()
                if isinstance(value, (int, float, str, bool)) or value is None
            }
            report("signal", name, json.dumps(facts, sort_keys=True))

        return heard

    receivers = []
    for name in ("lease_claimed", "lease_renewed", "lease_renewal_failed", "lease_lost"):
        heard = receiver(name)
        receivers.append(heard)  # the signals hold weak references
        getattr(signals, name).connect(heard)
    claim()
    while not Path(args.go).exists():
        with contextlib.suppress(WorkerLeaseLost):  # the database is away: IDs stopped
            generate()
        time.sleep(0.01)
    report("done")


if __name__ == "__main__":
    main()
