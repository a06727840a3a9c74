"""Roles with only the grants a DBA gives, on a real MariaDB (issue 32, docs/grants.rst).

The test database is migrated by the suite's own user, the owner. Each test creates roles of
its own on the same server, grants them what the test names, and runs real processes as them
(``python -m django ...`` on ``tests.settings``, connected to the test database): the app
(Django's tables, granted table by table, as a careful DBA grants) and a service that inserts
raw rows. Both key paths: the column default here, the trigger under
``SNOWFLAKE_TEST_MARIADB_KEYS=trigger`` (CI's strict-path step).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.db import connection

from harness import ROOT
from tests.testapp.models import Customer

TRIGGER = settings.SNOWFLAKE.get("MARIADB_KEYS") == "trigger"

pytestmark = [
    pytest.mark.skipif(os.environ.get("SNOWFLAKE_TEST_DB") != "mariadb", reason="MariaDB's roles"),
    pytest.mark.django_db(transaction=True),
]

TABLE = Customer._meta.db_table
#: The heartbeat's privileges on the column-default path (docs/grants.rst).
HEARTBEAT_GRANTS = (
    "GRANT SELECT, INSERT ON `{db}`.`django_snowflake_id_key` TO {role}",
    "GRANT SELECT, INSERT, DELETE ON `{db}`.`django_snowflake_id_clock` TO {role}",
)
#: What the script below prints when the heartbeat has run twice.
MOVE = """
import logging, sys
import django
django.setup()
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="LOG %(levelname)s %(message)s")
from django.db import connection
from django_snowflake.conf import get_layout
from django_snowflake.database_keys import move_database_clocks
from django_snowflake.vendors import database
move_database_clocks()
move_database_clocks()
try:
    print("moved:", database(connection).move_clock(get_layout()) or "nothing")
except Exception as exc:
    print("refused:", exc.args[0])
"""


Role = Callable[..., str]


@pytest.fixture
def role() -> Iterator[Role]:
    """Make a role (``role(*grants)``: each a GRANT statement with ``{db}`` and ``{role}``),
    dropped afterwards; returns its name."""
    made: list[str] = []

    def make(*grants: str) -> str:
        name = f"snow_{uuid.uuid4().hex[:10]}"
        quoted = f"'{name}'@'%'"
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE USER {quoted} IDENTIFIED BY 'pw'")
            made.append(quoted)
            for grant in grants:
                cursor.execute(grant.format(db=connection.settings_dict["NAME"], role=quoted))
        return name

    yield make
    with connection.cursor() as cursor:
        for quoted in made:
            cursor.execute(f"DROP USER IF EXISTS {quoted}")


def table_by_table() -> list[str]:
    """The app's DML on each of Django's tables, and SELECT on django_migrations."""
    tables = connection.introspection.django_table_names(only_existing=True)
    grants = [
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{{db}}`.`{table}` TO {{role}}"
        for table in tables
    ]
    return [*grants, "GRANT SELECT ON `{db}`.`django_migrations` TO {role}"]


def run_as(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` on the test database as role ``name``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_DB": "mariadb",
        "SNOWFLAKE_TEST_DB_USER": name,
        "SNOWFLAKE_TEST_DB_PASSWORD": "pw",
        "SNOWFLAKE_TEST_DB_NAME": connection.settings_dict["NAME"],
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def raw_key_lag_ms(name: str, *, move: bool = False) -> float:
    """Insert a raw row as role ``name``, leaving the key out (after moving the key clock as
    a heartbeat does, with ``move``); how far its key's time is behind the server's clock
    (ms)."""
    script = f"""
import django
django.setup()
from django.db import connection
from django_snowflake import decode
if {move}:
    from django_snowflake.database_keys import move_database_clocks
    move_database_clocks()
with connection.cursor() as cursor:
    cursor.execute("INSERT INTO `{TABLE}` (name) VALUES ('raw')")
    cursor.execute("SELECT MAX(id), UNIX_TIMESTAMP(SYSDATE(3)) * 1000 FROM `{TABLE}`")
    key, now = cursor.fetchone()
print("lag:", float(now) - decode(key).timestamp.timestamp() * 1000)
"""
    done = run_as(name, "-c", script)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split("lag:")[1])


@pytest.mark.skipif(TRIGGER, reason="the heartbeat moves the clock on the column-default path")
def test_an_app_granted_table_by_table_is_told_which_grants_the_heartbeat_lacks(
    role: Role,
) -> None:
    """Issue 32: such an app held its lease, moved nothing and said nothing (on d0da167 the
    heartbeat took the hidden clock table for the trigger path); now the heartbeat logs one
    error naming the GRANTs, and ``check --database`` fails with E055, naming them too."""
    app = role(*table_by_table())
    moved = run_as(app, "-c", MOVE)
    errors = [line for line in moved.stderr.splitlines() if line.startswith("LOG ERROR")]
    assert len(errors) == 1, moved.stderr  # twice the beat, once the line
    for grant in HEARTBEAT_GRANTS:
        wanted = grant.format(db=connection.settings_dict["NAME"], role=f"'{app}'@'%'")
        assert wanted in errors[0], errors[0]
    assert "moved: " not in moved.stdout and "refused: 1142" in moved.stdout
    checked = run_as(app, "-m", "django", "check", "--database", "default")
    assert checked.returncode != 0
    assert "django_snowflake.E055" in checked.stderr
    assert "django_snowflake_id_clock" in checked.stderr


@pytest.mark.skipif(TRIGGER, reason="the heartbeat moves the clock on the column-default path")
def test_with_the_documented_grants_the_app_moves_the_clock_and_raw_keys_follow_it(
    role: Role,
) -> None:
    app = role(*table_by_table(), *HEARTBEAT_GRANTS)
    moved = run_as(app, "-c", MOVE)
    assert "LOG ERROR" not in moved.stderr, moved.stderr
    assert "moved: moved" in moved.stdout, moved.stdout + moved.stderr
    checked = run_as(app, "-m", "django", "check", "--database", "default")
    assert checked.returncode == 0, checked.stderr
    # The heartbeat moves the clock each second; a raw key right after a move is at it.
    assert abs(raw_key_lag_ms(app, move=True)) < 1000


def test_a_service_without_the_key_grant_gets_a_clear_error_and_with_it_inserts(
    role: Role,
) -> None:
    """The service role: INSERT on its table; on the column-default path also SELECT, INSERT
    on the key sequence (docs/grants.rst); the trigger path needs nothing more."""
    bare = role(f"GRANT SELECT, INSERT ON `{{db}}`.`{TABLE}` TO {{role}}")
    if TRIGGER:
        assert abs(raw_key_lag_ms(bare)) < 1000  # the trigger's function keeps its clock
        return
    script = f"""
import django
django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("INSERT INTO `{TABLE}` (name) VALUES ('raw')")
"""
    refused = run_as(bare, "-c", script)
    assert refused.returncode != 0 and "django_snowflake_id_key" in refused.stderr
    assert "1142" in refused.stderr
    granted = role(
        f"GRANT SELECT, INSERT ON `{{db}}`.`{TABLE}` TO {{role}}",
        "GRANT SELECT, INSERT ON `{db}`.`django_snowflake_id_key` TO {role}",
    )
    raw_key_lag_ms(granted)


def test_show_worker_without_execute_says_it_cannot_read_the_function(role: Role) -> None:
    """Issue 32: it said "not installed ... run manage.py migrate" on both paths."""
    app = role(*table_by_table())
    shown = run_as(app, "-m", "django", "show_worker")
    assert shown.returncode == 0, shown.stderr
    assert "not installed" not in shown.stdout, shown.stdout
    assert "may not execute it" in shown.stdout and "GRANT EXECUTE ON FUNCTION" in shown.stdout
    allowed = role(
        *table_by_table(), "GRANT EXECUTE ON FUNCTION `{db}`.`django_snowflake_id` TO {role}"
    )
    shown = run_as(allowed, "-m", "django", "show_worker")
    assert shown.returncode == 0, shown.stderr
    assert "may not execute it" not in shown.stdout and "not installed" not in shown.stdout
