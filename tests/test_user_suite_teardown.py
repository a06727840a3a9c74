"""A user's own pytest session with the default settings (the database allocator) ends
cleanly: the allocator keeps no connection open, so pytest-django can drop the test database
(PostgreSQL warned "database ... is being accessed by other users"), and the process releases
its slot before that database is dropped, so the end of the run is quiet (issue 27, item 3:
"Could not release worker slot 0: no such table" on SQLite, 'database "test_..." does not
exist' on PostgreSQL, from the release at exit). A release that fails while the database is
there still says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.processes import run_python

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

USER_TESTS = """
import time

import pytest

from django_snowflake import generate, get_generator


# In a TestCase's transaction, which the claim and the renewals stay out of: their rows
# outlive the test (a TransactionTestCase's flush would empty the worker table before the end).
@pytest.mark.django_db
def test_makes_ids():
    generate()
    time.sleep(1.5)  # a heartbeat renews the lease meanwhile (LEASE_SECONDS = 3)
    assert get_generator().lease is not None
"""

# A session fixture torn down before the test database: the slot's table goes away while the
# database is still there, so the release fails for a reason nobody expects.
BROKEN_TABLE = """
import pytest
from django.db import connection


@pytest.fixture(scope="session", autouse=True)
def lose_the_worker_table(django_db_setup, django_db_blocker):
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_snowflake_workernode RENAME TO workernode_gone")
"""

RELEASE = "Could not release worker slot"


def run_user_suite(tmp_path: Path, conftest: str = "") -> str:
    """Run ``USER_TESTS`` in a pytest session of their own (a fresh interpreter, warnings as
    errors, pytest's log capture off so that every log line of the end reaches the output)."""
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "pytest.ini").write_text("[pytest]\nDJANGO_SETTINGS_MODULE = tests.settings\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SNOWFLAKE_TEST_SETTINGS": '{"WORKER_ALLOCATOR": "database", "LEASE_SECONDS": 3}',
        "SNOWFLAKE_TEST_RUN": f"teardown{os.getpid()}",
        # SQLite: the database the connection names again once the test database is gone.
        "SNOWFLAKE_TEST_DB_NAME": str(tmp_path / "db.sqlite3"),
    }
    if os.environ.get("SNOWFLAKE_TEST_DB", "sqlite") != "sqlite":
        env.pop("SNOWFLAKE_TEST_DB_NAME")
    command = ["-W", "error", "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:logging"]
    returncode, output = run_python(
        *command,
        "-q",
        "-s",
        "-W",
        "error",
        "--rootdir",
        str(tmp_path),
        str(tmp_path),
        cwd=tmp_path,
        env=env,
    )
    assert returncode == 0, output[-3000:]
    assert "1 passed" in output
    return output


def test_the_test_database_is_dropped_at_the_end_of_a_users_session(tmp_path: Path) -> None:
    output = run_user_suite(tmp_path)
    assert "being accessed by other users" not in output
    assert "Traceback" not in output
    # The slot was released while its database was there: no line about it at the end.
    assert RELEASE not in output, output[-3000:]
    assert "Worker lease" not in output  # nor a renewal that meets the dropped database


def test_a_release_that_fails_still_says_so(tmp_path: Path) -> None:
    output = run_user_suite(tmp_path, BROKEN_TABLE)
    lines = [line for line in output.splitlines() if RELEASE in line]
    assert len(lines) == 1, output[-3000:]
    assert "workernode" in lines[0]
    assert "Traceback" not in output
