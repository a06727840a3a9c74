"""The example shop, run as a newcomer runs it: its own manage.py, in fresh processes.

It has its own settings, so it runs in subprocesses, on a temporary SQLite file
(``EXAMPLE_DB``); its own tests (``example_project/shop/tests.py``, with its factory-boy
factories) run under its test settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "example_project" / "manage.py"

pytestmark = pytest.mark.slow


def manage(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "EXAMPLE_DB": str(db),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("SNOWFLAKE_TEST_SETTINGS", None)
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_newcomer_commands(tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite3"
    manage("check", db=db)
    manage("makemigrations", "--check", "--dry-run", db=db)
    manage("migrate", db=db)
    first = manage("seed_demo", db=db).stdout
    assert "Created 5 products, 5 customers and 12 orders." in first
    assert "username 'admin', password 'snowflake'" in first
    again = manage("seed_demo", db=db).stdout
    assert "Demo data is already there; nothing added." in again
    decoded = manage("decode_snowflake", "249881868931956749", db=db).stdout
    assert "worker_id" in decoded


def test_the_example_projects_own_tests(tmp_path: Path) -> None:
    result = manage("test", "shop", "--settings=config.test_settings", db=tmp_path / "t.sqlite3")
    assert "Ran 7 tests" in result.stderr
