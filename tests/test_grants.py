"""Roles with only the grants a DBA gives, on real MariaDB and PostgreSQL servers (issue 32,
docs/grants.rst).

The test database is migrated by the suite's own user, the owner. Each test creates roles of
its own on the same server, grants them what the test names, and runs real processes as them
(``python -m django ...`` on ``tests.settings``, connected to the test database): the app
(Django's tables, granted table by table, as a careful DBA grants) and a service that inserts
raw rows. On MariaDB both key paths: the column default here, the trigger under
``SNOWFLAKE_TEST_MARIADB_KEYS=trigger`` (CI's strict-path step); on PostgreSQL the function in
``public`` and in a function schema of its own, with ``EXECUTE`` revoked from ``PUBLIC``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from harness import ROOT
from tests.testapp.models import Customer

TRIGGER = settings.SNOWFLAKE.get("MARIADB_KEYS") == "trigger"

VENDOR = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")
MARIADB = pytest.mark.skipif(VENDOR != "mariadb", reason="MariaDB's roles")
POSTGRESQL = pytest.mark.skipif(VENDOR != "postgresql", reason="PostgreSQL's roles")
pytestmark = [
    pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite has no roles"),
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


def run_as(
    name: str,
    *args: str,
    database: str = "",
    snowflake: dict[str, Any] | None = None,
    password: str = "pw",
) -> subprocess.CompletedProcess[str]:
    """``python *args`` on the test database (or ``database``) as role ``name`` (a role of
    :func:`role`; the suite's own user with its ``password``), with the suite's ``SNOWFLAKE``
    (or ``snowflake``)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SNOWFLAKE_TEST_DB": VENDOR,
        "SNOWFLAKE_TEST_DB_USER": name,
        "SNOWFLAKE_TEST_DB_PASSWORD": password,
        "SNOWFLAKE_TEST_DB_NAME": database or connection.settings_dict["NAME"],
        "SNOWFLAKE_TEST_SETTINGS": json.dumps(snowflake or settings.SNOWFLAKE),
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
@MARIADB
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
@MARIADB
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


@pytest.mark.skipif(TRIGGER, reason="the column default's event")
@MARIADB
def test_check_deploy_as_the_app_says_it_cannot_see_the_event(role: Role) -> None:
    """W059's "hidden": the app's documented grants hold no EVENT, so the catalogue lists no
    event to it. It says so and sends the reader to the role that runs migrate, never "the
    database has no event", which would send a DBA to grant what the app need not hold."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SET GLOBAL event_scheduler = ON"
        )  # the suite leaves it on (test_clock_event)
    app = role(*table_by_table(), *HEARTBEAT_GRANTS)
    checked = run_as(app, "-m", "django", "check", "--deploy", "--database", "default")
    assert checked.returncode == 0, checked.stderr
    (w059,) = [line for line in checked.stderr.splitlines() if "django_snowflake.W059" in line]
    assert "this role may not see the database's events" in w059, w059
    assert "has no event" not in checked.stderr
    assert "as the role that runs migrate" in checked.stderr
    # The suite's own user, which ran migrate, sees the event running: no W059.
    owner = run_as(
        connection.settings_dict["USER"],
        *("-m", "django", "check", "--deploy", "--database", "default"),
        password=connection.settings_dict["PASSWORD"],
    )
    assert owner.returncode == 0 and "W059" not in owner.stderr, owner.stderr


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database of its own on the test server, dropped after."""
    name = f"{connection.settings_dict['NAME']}_owner"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    yield name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.mark.skipif(TRIGGER, reason="the column default's event")
@MARIADB
def test_an_owner_without_event_migrates_with_a_warning_and_check_deploy_names_the_grant(
    role: Role, empty_database: str
) -> None:
    """docs/grants.rst: the role that runs migrate needs EVENT for the clock without processes.
    Without it migrate succeeds (the event adds to the heartbeats), warns once, naming the
    GRANT; check --deploy then says the database has no event and which GRANT to run; with
    the grant, migrate makes the event and the warning is gone."""
    owner = role(
        f"GRANT ALL PRIVILEGES ON `{empty_database}`.* TO {{role}}",
        f"REVOKE EVENT ON `{empty_database}`.* FROM {{role}}",
    )
    migrated = run_as(owner, "-m", "django", "migrate", database=empty_database)
    assert migrated.returncode == 0, migrated.stderr
    warnings = [line for line in migrated.stderr.splitlines() if "django_snowflake_id_tick" in line]
    assert len(warnings) == 1, migrated.stderr
    assert "may not create the event" in warnings[0] and "GRANT EVENT" in warnings[0]

    suite_user = connection.settings_dict["USER"], connection.settings_dict["PASSWORD"]
    deploy = ("-m", "django", "check", "--deploy", "--database", "default")
    checked = run_as(suite_user[0], *deploy, database=empty_database, password=suite_user[1])
    (w059,) = [line for line in checked.stderr.splitlines() if "django_snowflake.W059" in line]
    assert "has no event django_snowflake_id_tick" in w059, w059
    assert "GRANT EVENT ON the database TO the role that runs migrate" in checked.stderr

    with connection.cursor() as cursor:
        cursor.execute(f"GRANT EVENT ON `{empty_database}`.* TO '{owner}'@'%'")
    again = run_as(owner, "-m", "django", "migrate", database=empty_database)
    assert again.returncode == 0 and "django_snowflake_id_tick" not in again.stderr, again.stderr
    checked = run_as(suite_user[0], *deploy, database=empty_database, password=suite_user[1])
    assert "W059" not in checked.stderr, checked.stderr


@MARIADB
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


@MARIADB
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


# PostgreSQL: the function's grants (docs/grants.rst), with EXECUTE revoked from PUBLIC.
FUNCTIONS = ("django_snowflake_id()", "django_snowflake_id_failover()")
#: What the app and a service need on the function schema, by docs/grants.rst.
PG_FUNCTION_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
    "GRANT EXECUTE ON FUNCTION {schema}.django_snowflake_id(), "
    "{schema}.django_snowflake_id_failover() TO {role}",
)


class PgDatabase:
    """A migrated database whose function lives in ``schema``: the test database (``public``)
    or one of its own, migrated by the owner with ``FUNCTION_SCHEMA`` set."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.roles: list[str] = []
        self.snowflake = {**settings.SNOWFLAKE, "FUNCTION_SCHEMA": schema}
        self.name = connection.settings_dict["NAME"]
        if schema != "public":
            self.name = f"{self.name}_{schema}"
            self.admin(f"CREATE DATABASE {self.name}", database="postgres")
            migrated = run_as(
                connection.settings_dict["USER"], "-m", "django", "migrate", "-v0",
                database=self.name, snowflake=self.snowflake,
            )  # fmt: skip
            assert migrated.returncode == 0, migrated.stderr
        functions = ", ".join(f"{schema}.{name}" for name in FUNCTIONS)
        self.admin(f"REVOKE EXECUTE ON FUNCTION {functions} FROM PUBLIC")

    def admin(self, *statements: str, database: str = "") -> None:
        import psycopg

        settings_dict = connection.settings_dict
        with psycopg.connect(
            host=settings_dict["HOST"], port=settings_dict["PORT"], user=settings_dict["USER"],
            dbname=database or self.name, autocommit=True,
        ) as session:  # fmt: skip
            for statement in statements:
                session.execute(statement)  # type: ignore[arg-type]

    def role(self, *grants: str) -> str:
        """A role with ``grants`` here (``{schema}``, ``{role}`` and ``{table}`` filled in)."""
        name = f"snow_{uuid.uuid4().hex[:10]}"
        self.admin(f"CREATE ROLE {name} LOGIN PASSWORD 'pw'")
        self.roles.append(name)
        self.admin(*(grant.format(schema=self.schema, role=name, table=TABLE) for grant in grants))
        return name

    def drop(self) -> None:
        functions = ", ".join(f"{self.schema}.{name}" for name in FUNCTIONS)
        if self.schema == "public":
            self.admin(f"GRANT EXECUTE ON FUNCTION {functions} TO PUBLIC")
            self.admin(*(f"DROP OWNED BY {name}" for name in self.roles))
        else:
            self.admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", database="postgres")
        self.admin(*(f"DROP ROLE IF EXISTS {name}" for name in self.roles), database="postgres")


@pytest.fixture(params=["public", "snowflake"])
def pg_database(request: pytest.FixtureRequest) -> Iterator[PgDatabase]:
    created = PgDatabase(request.param)
    yield created
    created.drop()


#: An ORM insert and a raw one that leaves the key out; prints both keys.
INSERTS = f"""
import django
django.setup()
from django.db import connection
from tests.testapp.models import Customer
orm = Customer.objects.create(name="orm").pk
with connection.cursor() as cursor:
    cursor.execute("INSERT INTO {TABLE} (name) VALUES ('raw') RETURNING id")
    print("keys:", orm, cursor.fetchone()[0])
"""
#: A raw insert that leaves the key out; prints the key.
RAW = f"""
import django
django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("INSERT INTO {TABLE} (name) VALUES ('raw') RETURNING id")
    print("key:", cursor.fetchone()[0])
"""


@POSTGRESQL
def test_app_and_service_roles_hold_exactly_the_documented_grants(pg_database: PgDatabase) -> None:
    """The app: DML on each of Django's tables and the function's grants; a service: INSERT
    on its table and the same. Both insert, the app through the ORM and raw SQL."""
    tables = connection.introspection.django_table_names(only_existing=True)
    app = pg_database.role(
        *(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "{table}" TO {{role}}'
            for table in tables
        ),
        *PG_FUNCTION_GRANTS,
    )
    done = run_as(app, "-c", INSERTS, database=pg_database.name, snowflake=pg_database.snowflake)
    assert done.returncode == 0, done.stderr
    orm, raw = map(int, done.stdout.split("keys:")[1].split())
    assert orm != raw
    service = pg_database.role(
        "GRANT SELECT, INSERT ON TABLE {table} TO {role}", *PG_FUNCTION_GRANTS
    )
    done = run_as(service, "-c", RAW, database=pg_database.name, snowflake=pg_database.snowflake)
    assert done.returncode == 0, done.stderr


@POSTGRESQL
@pytest.mark.parametrize(
    ("left_out", "error"),
    [
        (1, "permission denied for sequence django_snowflake_id_"),
        (2, "permission denied for function django_snowflake_id"),
    ],
    ids=["sequences", "execute"],
)
def test_a_service_missing_one_grant_gets_postgresqls_error_naming_it(
    pg_database: PgDatabase, left_out: int, error: str
) -> None:
    grants = [grant for index, grant in enumerate(PG_FUNCTION_GRANTS) if index != left_out]
    service = pg_database.role("GRANT SELECT, INSERT ON TABLE {table} TO {role}", *grants)
    done = run_as(service, "-c", RAW, database=pg_database.name, snowflake=pg_database.snowflake)
    assert done.returncode != 0 and error in done.stderr, done.stderr
