"""A user's own pytest session with the default settings (the database allocator) ends
cleanly: the allocator keeps no connection open, so pytest-django can drop the test database
(PostgreSQL warned "database ... is being accessed by other users")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.processes import run_python

ROOT = Path(__file__).resolve().parent.parent

USER_TESTS = """
import time

import pytest

from harness.processes import run_python

from django_snowflake import generate, get_generator


@pytest.mark.django_db(transaction=True)
def test_makes_ids():
    generate()
    time.sleep(1.5)  # a heartbeat renews the lease meanwhile (LEASE_SECONDS = 3)
    assert get_generator().lease is not None
"""


@pytest.mark.slow
def test_the_test_database_is_dropped_at_the_end_of_a_users_session(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nDJANGO_SETTINGS_MODULE = tests.settings\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SNOWFLAKE_TEST_SETTINGS": '{"WORKER_ALLOCATOR": "database", "LEASE_SECONDS": 3}',
        "SNOWFLAKE_TEST_RUN": f"teardown{os.getpid()}",
    }
    command = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "-W", "error"]
    returncode, output = run_python(
        *command, "--rootdir", str(tmp_path), str(tmp_path / "test_user.py"), cwd=tmp_path, env=env
    )
    assert returncode == 0, output[-3000:]
    assert "1 passed" in output
    assert "being accessed by other users" not in output
    # At exit the test database is gone: the release says so in one line, no traceback.
    assert "Traceback" not in output
