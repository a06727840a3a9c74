"""Keys from the database: django_snowflake_id(), its worker slot, and the SQL migrate runs."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext, override_settings

import django_snowflake
from django_snowflake.conf import get_layout
from django_snowflake.database_keys import prepare_connection
from django_snowflake.database_slots import (
    DATABASE_HOST,
    LEASE_END,
    database_label,
    lease_database_slot,
)
from django_snowflake.models import WorkerNode
from django_snowflake.vendors import database, installed_slot
from tests.conftest import model_table
from tests.testapp.models import Basket, Customer, Writer

SERVER = pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's function is the process's generator"
)


def database_ids(count: int, alias: str = "default") -> list[int]:
    with connections[alias].cursor() as cursor:
        ids = []
        for _ in range(count):
            cursor.execute("SELECT django_snowflake_id()")
            ids.append(cursor.fetchone()[0])
    return ids


@pytest.fixture
def keys_app(transactional_db: None) -> Iterator[MigrationExecutor]:
    """tests.keys_app installed and unmigrated; unmigrated again after the test."""
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.keys_app"]):
        yield MigrationExecutor(connection)
        call_command("migrate", "keys_app", "zero", verbosity=0)


def test_sqlmigrate_prints_exactly_what_migrate_runs(keys_app: MigrationExecutor) -> None:
    # The app's first model is keyed by SnowflakeAutoField: the case where migrate used to
    # build an AUTOINCREMENT/IDENTITY key while sqlmigrate printed a plain bigint.
    node = ("keys_app", "0001_initial")
    printed = keys_app.loader.collect_sql([(keys_app.loader.graph.nodes[node], False)])
    with CaptureQueriesContext(connection) as queries:
        call_command("migrate", "keys_app", "0001", verbosity=0)
    ran = [query["sql"] for query in queries.captured_queries]
    statements = [
        s.removesuffix(";") for s in printed if s not in ("BEGIN;", "COMMIT;") and s[:2] != "--"
    ]
    assert statements and all(statement in ran for statement in statements), (statements, ran)
    create = next(s for s in statements if s.upper().startswith("CREATE TABLE"))
    for word in ("AUTOINCREMENT", "AUTO_INCREMENT", "IDENTITY", "SERIAL"):
        assert word not in create.upper()
    from tests.keys_app.models import Note

    note = Note.objects.create(text="x")
    assert django_snowflake.decode(note.pk).timestamp.year >= 2025


@SERVER
@pytest.mark.django_db
def test_the_database_issues_under_its_own_never_expiring_slot() -> None:
    layout = get_layout()
    worker, datacenter = lease_database_slot("default", layout) or (None, None)
    assert installed_slot("default") == (True, (worker, datacenter))
    row = WorkerNode.objects.get(worker_id=worker, datacenter_id=datacenter)
    assert row.host_name == DATABASE_HOST and row.lease_expires_at == LEASE_END
    assert row.label == database_label("default")
    ids = database_ids(50)
    assert ids == sorted(set(ids))
    parts = [django_snowflake.decode(value) for value in ids]
    assert {(p.worker_id, p.datacenter_id) for p in parts} == {(worker, datacenter)}
    now = datetime.now(UTC)
    assert all(abs(p.timestamp - now) < timedelta(seconds=30) for p in parts)


@SERVER
@pytest.mark.django_db
def test_each_database_leases_a_slot_of_its_own_from_the_top() -> None:
    layout = get_layout()
    mine = lease_database_slot("default", layout)
    assert lease_database_slot("default", layout) == mine  # kept, not leased again
    shard = lease_database_slot("shard-x", layout)
    assert shard is not None and mine is not None and shard[0] < mine[0]
    assert WorkerNode.objects.filter(label=database_label("shard-x")).count() == 1
    # No process can take them: their leases never expire.
    assert not WorkerNode.objects.filter(host_name=DATABASE_HOST, lease_expires_at__lt=LEASE_END)


@SERVER
@pytest.mark.django_db(transaction=True)
def test_a_database_whose_function_has_no_slot_refuses_and_says_what_to_run() -> None:
    layout = get_layout()
    slot = lease_database_slot("default", layout)
    keys: Any = database(connection)
    try:
        with connection.cursor() as cursor:
            for statement in keys.install_sql(layout, None):
                cursor.execute(statement)
        assert installed_slot("default") == (True, None)
        with pytest.raises(Exception, match="no Snowflake worker slot"):
            database_ids(1)
    finally:
        with connection.cursor() as cursor:
            for statement in keys.install_sql(layout, slot):
                cursor.execute(statement)
    assert len(database_ids(3)) == 3


@SERVER
@pytest.mark.django_db(transaction=True)
def test_concurrent_sessions_never_share_an_id() -> None:
    results: list[list[int]] = []

    def session() -> None:
        try:
            results.append(database_ids(400))
        finally:
            connection.close()

    threads = [threading.Thread(target=session) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    for ids in results:
        assert ids == sorted(ids)  # each session's IDs increase
    every = [value for ids in results for value in ids]
    assert len(set(every)) == len(every) == 1600


@SERVER
@pytest.mark.django_db(transaction=True)
def test_ids_never_fall_behind_the_wall_clock() -> None:
    # After an idle gap the logical clock catches up: an ID's time is at least the time of
    # the call (it may be ahead, after a clock step back or a burst).
    for _ in range(3):
        before = datetime.now(UTC).replace(microsecond=0)
        (value,) = database_ids(1)
        assert django_snowflake.decode(value).timestamp >= before
        time.sleep(0.05)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")
@pytest.mark.django_db(transaction=True)
def test_sqlite_connections_outside_django_refuse_clearly() -> None:
    from tests.testapp.models import Writer

    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT django_snowflake_id()")
        (value,) = cursor.fetchone()
    assert django_snowflake.decode(value).timestamp.year >= 2025
    other = sqlite3.connect(connection.settings_dict["NAME"])
    try:
        with pytest.raises(sqlite3.OperationalError, match="django_snowflake_id"):
            other.execute(f"INSERT INTO {Writer._meta.db_table} (name, greeting) VALUES ('', '')")
    finally:
        other.close()


# A fresh process on a migrated SQLite file (busy timeout 1 s): another connection holds the
# file's lock through its first INSERT (as Django's compiler writes it), whose claim of a
# worker slot fails; then the lock is gone.
_CLAIM_AFTER_A_LOCK = '''
import json, sqlite3, sys, time
from tests import settings
settings.DATABASES["default"]["OPTIONS"]["timeout"] = 1
import django
django.setup()
from django.db import OperationalError, connection
from tests.testapp.models import Writer

insert = f"""INSERT INTO "{Writer._meta.db_table}" ("name", "greeting") VALUES ('raw', '')"""
locker = sqlite3.connect(sys.argv[1], isolation_level=None)
locker.execute("BEGIN EXCLUSIVE")
started = time.monotonic()
try:
    connection.cursor().execute(insert)
    first = "inserted"
except OperationalError as error:
    first = str(error)
first_seconds = time.monotonic() - started
locker.execute("ROLLBACK")
time.sleep(1.2)
later = []
for _ in range(3):
    started = time.monotonic()
    connection.cursor().execute(insert)
    later.append(time.monotonic() - started)
rows = connection.cursor().execute(f"SELECT id FROM {Writer._meta.db_table}").fetchall()
print(json.dumps({"first": first, "first_seconds": first_seconds, "later": later,
                  "keys": [row[0] for row in rows]}))
'''


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")
def test_sqlite_recovers_from_a_first_claim_that_failed(tmp_path: Path) -> None:
    """Issue 19 item 5: the first raw INSERT's claim fails (another writer holds the lock past
    the busy timeout); once the writer is gone, the same connection's INSERTs get keys at once
    (it used to be left broken, each INSERT failing after the claim's timeout)."""
    path = tmp_path / "claim.sqlite3"
    env = {**os.environ, "SNOWFLAKE_TEST_DB_NAME": str(path)}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["SNOWFLAKE_TEST_SETTINGS"] = json.dumps({"LEASE_SECONDS": 5})  # a slot leased
    migrate = [sys.executable, "-m", "django", "migrate", "-v0"]
    subprocess.run(migrate, env=env, check=True, timeout=300)
    done = subprocess.run(
        [sys.executable, "-c", _CLAIM_AFTER_A_LOCK, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert "locked" in result["first"], result
    assert max(result["later"]) < 0.9, result  # none waited out the busy timeout
    keys = result["keys"]
    assert len(keys) == 3 and len(set(keys)) == 3, result
    assert all(django_snowflake.decode(key).timestamp.year >= 2025 for key in keys)


def test_contrib_auth_many_to_many_rows_get_keys_under_the_switch() -> None:
    # Run in a fresh interpreter: DEFAULT_AUTO_FIELD cannot change once the apps are loaded.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.switch_project",
        "SNOWFLAKE_TEST_RUN": f"switch{os.getpid()}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.switch_project"],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {
        "vendor": connection.vendor,
        "admin_status": 302,  # the user change form saved
        "bob": [["editors"], True, True],
        "carol": [["editors"], ["change_user"]],
        "rows": [2, 2, 1],
        "keys_are_snowflakes": True,
    }


@pytest.mark.django_db(transaction=True)
def test_a_model_with_nothing_but_its_key() -> None:
    """Django inserts it naming no column but the key, ``INSERT ... ("id") VALUES (NULL)`` on
    SQLite, which bypassed the column's DEFAULT: "NOT NULL constraint failed"."""
    started = datetime.now(UTC).replace(microsecond=0)
    baskets = [Basket.objects.create() for _ in range(3)]
    Basket.objects.bulk_create([Basket(), Basket()])
    keys = list(Basket.objects.values_list("pk", flat=True))
    assert len(set(keys)) == 5
    assert all(django_snowflake.decode(key).timestamp >= started for key in keys)
    assert {basket.pk for basket in baskets} <= set(keys)


@pytest.mark.django_db(transaction=True)
def test_savepoints_after_a_database_made_key() -> None:
    """MariaDB refused every SAVEPOINT once the function had written its base to a
    non-transactional table in the transaction (error 1178): a nested atomic(), a
    get_or_create after a create, taggit in the admin, TestCase tests."""
    with transaction.atomic():
        time.sleep(0.01)  # behind the wall clock: the function moves its base
        Writer.objects.create(name="a")
        with transaction.atomic():
            Writer.objects.create(name="b")
        with contextlib.suppress(ValueError), transaction.atomic():
            Writer.objects.create(name="c")
            raise ValueError("rolled back to the savepoint")
    assert sorted(Writer.objects.values_list("name", flat=True)) == ["a", "b"]


@pytest.mark.django_db
def test_raw_sql_into_a_snowflake_model_table_gets_a_key() -> None:
    """SnowflakeField primary keys (SnowflakeModel) default to the function too: another
    service's INSERT that leaves the key out used to fail with NOT NULL (issue 19 item 6)."""
    table = connection.ops.quote_name(Customer._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (name) VALUES ('from another service')")
    (customer,) = Customer.objects.all()
    assert django_snowflake.decode(customer.pk).timestamp.year >= 2025


def test_a_copy_of_the_key_field_carries_no_database_default() -> None:
    """django-simple-history copies a model's fields into its historical model and turns the
    key into a plain BigIntegerField (transform_field); the copy kept db_default, so its
    migrations named our function and, without migrations, PostgreSQL could not create the
    table (0 of simple-history's 363 tests ran, issue 19 item 8)."""
    from django.db import models

    from django_snowflake.database_keys import _writing_columns
    from django_snowflake.fields import SnowflakeAutoField, SnowflakeField

    for original in (SnowflakeAutoField(primary_key=True), SnowflakeField(primary_key=True)):
        original.set_attributes_from_name("id")
        copied = copy.copy(original)
        copied.__class__ = models.BigIntegerField
        copied.primary_key = False
        token = _writing_columns.set(connection.alias)  # as the schema editor writes it
        try:
            assert not copied.has_db_default()
            assert "db_default" not in copied.deconstruct()[3]
            assert original.has_db_default()
        finally:
            _writing_columns.reset(token)
        assert not original.has_db_default()  # outside the schema editor: no default


@SERVER
@pytest.mark.django_db(transaction=True)
def test_without_migrations_the_function_exists_before_the_first_table() -> None:
    """pytest-django's --nomigrations (and an app's own test settings) create tables with the
    schema editor alone: the function is installed before the first table that refers to it,
    in a database that has never had it."""
    from django.db import models
    from django.test.utils import isolate_apps

    from django_snowflake.fields import SnowflakeAutoField

    with isolate_apps("tests.testapp"):

        class Fresh(models.Model):
            id = SnowflakeAutoField(primary_key=True)
            name = models.CharField(max_length=10)

            class Meta:
                app_label = "testapp"

            def __str__(self) -> str:
                return self.name

    name = f"snowflake_fresh_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    wrapper = type(connections["default"])
    fresh_db = wrapper({**connection.settings_dict, "NAME": name}, alias="fresh")
    prepare_connection(fresh_db)  # as every alias of a project is at start-up
    try:
        with fresh_db.schema_editor(atomic=False) as editor:
            editor.create_model(Fresh)
        table = fresh_db.ops.quote_name(Fresh._meta.db_table)
        with fresh_db.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} (name) VALUES ('raw')")
            cursor.execute(f"SELECT id FROM {table}")
            (key,) = cursor.fetchone()
        slot = lease_database_slot("fresh", get_layout())
        assert slot is not None and django_snowflake.decode(key).worker_id == slot[0]
    finally:
        fresh_db.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {name}")


@SERVER
@pytest.mark.django_db
def test_a_database_slot_is_leased_with_use_tz_off() -> None:
    """Django's own test settings have USE_TZ = False; MySQL's backend refused the aware
    datetimes of the lease, so migrate failed there."""
    with override_settings(USE_TZ=False):
        slot = lease_database_slot("naive-clock", get_layout())
    assert slot is not None
    assert WorkerNode.objects.get(label=database_label("naive-clock")).lease_expires_at.year == 9999


@pytest.mark.django_db(transaction=True)
def test_defaults_leave_a_column_a_migration_made_for_an_auto_field_alone() -> None:
    """An existing project turns the switch on before migrating its keys (docs/migrating.rst):
    at run time its models report SnowflakeAutoField, while their columns are still identity or
    auto-increment columns of AutoField. Migration 0004 must leave those alone (it failed:
    'column "id" of relation ... is an identity column')."""
    from django.db import models
    from django.test.utils import isolate_apps

    from django_snowflake.fields import SnowflakeAutoField

    with isolate_apps("tests.testapp"):

        class Post(models.Model):
            id = models.BigAutoField(primary_key=True)

            class Meta:
                app_label = "testapp"
                db_table = "testapp_switched_post"

            def __str__(self) -> str:
                return str(self.pk)

        class SwitchedPost(models.Model):
            id = SnowflakeAutoField(primary_key=True)

            class Meta:
                app_label = "testapp"
                db_table = "testapp_switched_post"

            def __str__(self) -> str:
                return str(self.pk)

    with model_table(Post):
        with connection.schema_editor() as editor:
            editor._snowflake_default(SwitchedPost, SwitchedPost._meta.pk)  # type: ignore[attr-defined]
        table = connection.ops.quote_name(Post._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} DEFAULT VALUES"
                if connection.vendor != "mysql"
                else f"INSERT INTO {table} () VALUES ()"
            )
        assert Post.objects.get().pk < 100  # still numbered by the database's own sequence


@SERVER
@pytest.mark.django_db
def test_W051_a_database_whose_function_issues_under_another_databases_slot() -> None:
    """A restored dump used as a new shard carries the other database's function."""
    from django_snowflake.checks import check_database_functions

    slot = lease_database_slot("default", get_layout())
    assert slot is not None
    assert check_database_functions(databases=["default"]) == []
    row = WorkerNode.objects.filter(worker_id=slot[0], datacenter_id=slot[1])
    row.update(label=database_label("shard-it-was-copied-from"))
    (message,) = check_database_functions(databases=["default"])
    assert message.id == "django_snowflake.W051"
    assert "shard-it-was-copied-from" in message.msg


@SERVER
@pytest.mark.django_db
def test_post_migrate_of_a_registry_without_the_package_does_nothing() -> None:
    """TransactionTestCase.available_apps migrates a registry that may leave the package out:
    the receiver looked WorkerNode up and raised LookupError (26 of Django's tests errored)."""
    from django_snowflake.operations import reinstall_after_migrate

    with override_settings(INSTALLED_APPS=["django.contrib.contenttypes"]):
        reinstall_after_migrate(using="default")


@SERVER
@pytest.mark.django_db
def test_the_slot_an_earlier_version_leased_for_the_database_is_kept() -> None:
    """Before one slot per database, migrate 0003 leased one labelled plain "database": the
    coordination database's function keeps that slot rather than leave it reserved for nobody."""
    slot = lease_database_slot("default", get_layout())
    assert slot is not None
    row = WorkerNode.objects.filter(worker_id=slot[0], datacenter_id=slot[1])
    row.update(label="database")
    assert lease_database_slot("default", get_layout()) == slot
    assert row.get().label == database_label("default")
