"""What a project's own test suite meets: pytest-django's database blocker, with and without
the recommended test settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from django_snowflake import decode, generate
from django_snowflake.exceptions import WorkerLeaseLost


def test_recommended_settings_generate_without_database_access() -> None:
    # tests/settings.py uses the recommended static allocator; this test has no django_db.
    assert decode(generate()).worker_id == 0


def test_database_allocator_under_the_blocker_explains_the_fix(settings: Any) -> None:
    settings.SNOWFLAKE = {}
    with pytest.raises(WorkerLeaseLost, match=r"WORKER_ALLOCATOR.*static.*Testing") as raised:
        generate()
    error = raised.value
    assert (error.reason, error.database) == (WorkerLeaseLost.DATABASE_BLOCKED, "default")
    assert isinstance(error.error, RuntimeError) and error.error is error.__cause__
    assert "Database access not allowed" in str(error)


@pytest.mark.slow
def test_a_suite_runs_under_pytest_xdist() -> None:
    # Two xdist workers, each with its own test database, both creating Snowflake rows with
    # the recommended settings, as a project's suite would.
    selected = [
        "tests/test_models.py",
        "tests/test_fields.py",
        "tests/test_user_test_suites.py::test_recommended_settings_generate_without_database_access",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", *selected],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "bringing up nodes" in result.stdout  # xdist ran the tests, not this process
    assert " passed" in result.stdout and " failed" not in result.stdout
