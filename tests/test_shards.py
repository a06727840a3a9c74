"""Several databases of one ID space (DESIGN section 4, "Several databases"): two shards and a
coordination database with the documented router, keys from the databases' functions and
from Django at once, on a real server (tests/shards_project.py, in a subprocess)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from django_snowflake.vendors.mysql.keys import NO_SLOT_SEQUENCE
from harness.processes import json_report

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's function is the process's own slot"
)


def run(scenario: str) -> dict[str, Any]:
    result: dict[str, Any] = json_report(
        "tests.shards_project", scenario, cwd=ROOT, settings="tests.shards_project"
    )
    return result


def test_two_shards_never_share_a_key_by_either_path() -> None:
    seen = run("in_order")
    assert seen["errors"] == []
    for counts in seen["counts"].values():
        assert counts["raw"] > 100 and counts["django"] == 700
    assert seen["shared"] == 0
    # Each shard's function has a slot of its own, and neither is the process's.
    (one,), (two,) = seen["raw_slots"]["shard1"], seen["raw_slots"]["shard2"]
    assert one != two
    assert not {one, two} & set(seen["django_slots"])
    assert seen["checks"] == {"default": [], "shard1": [], "shard2": []}


def test_a_shard_migrated_before_the_coordination_database_refuses_until_migrated_again() -> None:
    seen = run("shard_first")
    if (
        connection.vendor == "mysql"
        and settings.SNOWFLAKE.get("MARIADB_KEYS", "default") == "default"
    ):
        # A column default cannot signal: it draws a sequence spent at its install, whose name
        # says what to do (check --database says the rest).
        assert f"{NO_SLOT_SEQUENCE}' has run out" in seen["before"]
    else:
        assert "no Snowflake worker slot of its own" in seen["before"]
        assert "migrate --database=shard1" in seen["before"]
    assert seen["check_before"] == ["django_snowflake.W050"]
    assert len(seen["after"]) == 1 and seen["after"][0] > 2**40
    assert seen["check_after"] == []
