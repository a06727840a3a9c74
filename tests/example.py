"""Running the example shop's manage.py in a fresh process, on a SQLite file of the test's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "example_project" / "manage.py"


def example_env(db: Path) -> dict[str, str]:
    """The environment of an example process: its settings, its database file."""
    env = {**os.environ, "EXAMPLE_DB": str(db), "PYTHONPATH": str(ROOT)}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env.pop("SNOWFLAKE_TEST_SETTINGS", None)
    return env


def manage(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py *args``; fail with its output unless it exits 0."""
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        env=example_env(db),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def start(*args: str, db: Path, **kwargs: Any) -> subprocess.Popen[str]:
    """Start ``manage.py *args`` in the background."""
    return subprocess.Popen(
        [sys.executable, str(MANAGE), *args], cwd=ROOT, env=example_env(db), text=True, **kwargs
    )
