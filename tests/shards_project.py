"""Two shards and a coordination database, with the router of docs/workers.rst.

``python -m tests.shards_project SCENARIO`` (``SNOWFLAKE_TEST_DB`` is ``postgresql`` or
``mariadb``) creates three databases of its own on that server, runs the scenario, prints what
it saw as JSON and drops the databases. Run by tests/test_shards.py in a subprocess: the
project's ``DATABASES`` and ``DEFAULT_AUTO_FIELD`` are fixed when Django starts.

- ``in_order``: ``migrate`` the coordination database, then each shard; both shards take keys
  from raw SQL (the database's function, several connections each at once) and from Django
  (the process's slot) for a few seconds; every key of both shards is collected.
- ``shard_first``: a shard migrated before the coordination database has its table: its
  function refuses, ``check --database`` says what to run; after the coordination database
  and the shard are migrated again, it issues.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
import time
from typing import Any

from tests.settings import *  # noqa: F403
from tests.settings import RUN, get_db_conf

SHARDS = ("shard1", "shard2")
_server = get_db_conf()
DATABASES = {
    alias: {**copy.deepcopy(_server), "NAME": f"snowflake_{alias}_{RUN}"}
    for alias in ("default", *SHARDS)
}
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_snowflake",
    "tests.keys_app",
]
DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"
DATABASE_ROUTERS = ["tests.shards_project.SnowflakeRouter"]
SNOWFLAKE = {"DATABASE": "default"}
if os.environ.get("SNOWFLAKE_TEST_MARIADB_KEYS"):  # MariaDB's strict path (tests/settings.py)
    SNOWFLAKE["MARIADB_KEYS"] = os.environ["SNOWFLAKE_TEST_MARIADB_KEYS"]
ROOT_URLCONF = "tests.shards_project"
urlpatterns: list[Any] = []


class SnowflakeRouter:
    """WorkerNode lives on the coordination database, and only there (docs/workers.rst)."""

    app_label = "django_snowflake"
    alias = "default"

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return self.alias if model._meta.app_label == self.app_label else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return self.alias if model._meta.app_label == self.app_label else None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return db == self.alias if app_label == self.app_label else None


def server_sql(statements: list[str]) -> None:
    """Run ``statements`` on the server outside any of the project's databases."""
    conf = DATABASES["default"]
    if conf["ENGINE"].endswith("postgresql"):
        import psycopg

        with psycopg.connect(
            host=conf["HOST"], port=conf["PORT"], user=conf["USER"], dbname="postgres",
            password=conf["PASSWORD"] or None, autocommit=True,
        ) as server:  # fmt: skip
            for statement in statements:
                server.execute(statement)  # type: ignore[arg-type]
    else:
        import MySQLdb

        server = MySQLdb.connect(
            host=conf["HOST"], port=int(conf["PORT"]), user=conf["USER"], passwd=conf["PASSWORD"]
        )
        try:
            for statement in statements:
                server.cursor().execute(statement)
        finally:
            server.close()


def raw_keys(alias: str, seconds: float, schemas: list[str | None]) -> list[str]:
    """Insert rows that leave the key out from a connection per entry of ``schemas`` at once
    (a schema: a django-tenants connection set to it); return the errors met (the keys are
    read back from the table afterwards)."""
    from django.db import connections

    errors: list[str] = []
    stop = time.monotonic() + seconds

    def insert(schema: str | None) -> None:
        connection = connections[alias]
        if schema is not None:
            connection.set_schema(schema)  # type: ignore[attr-defined]
        try:
            with connection.cursor() as cursor:
                while time.monotonic() < stop:
                    cursor.execute("INSERT INTO keys_app_note (text) VALUES ('raw')")
        except Exception as exc:  # reported, not raised: the caller judges
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=insert, args=(schema,)) for schema in schemas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _check(alias: str) -> list[str]:
    from django.core import checks

    messages = checks.run_checks(databases=[alias])
    return [m.id for m in messages if m.id and m.is_serious(checks.WARNING)]


def in_order() -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connections

    from django_snowflake import decode
    from tests.keys_app.models import Note

    for alias in ("default", *SHARDS):
        call_command("migrate", database=alias, verbosity=0)
    errors: list[str] = []
    raw_threads = [
        threading.Thread(target=lambda a=alias: errors.extend(raw_keys(a, 3.0, [None] * 4)))
        for alias in SHARDS
    ]
    for thread in raw_threads:
        thread.start()
    for alias in SHARDS:  # Django's own inserts meanwhile, from this process's slot
        for i in range(200):
            Note.objects.using(alias).create(text=f"orm {i}")
        Note.objects.using(alias).bulk_create([Note(text="bulk") for _ in range(500)])
    for thread in raw_threads:
        thread.join()
    keys: dict[str, dict[str, list[int]]] = {}
    for alias in SHARDS:
        rows = Note.objects.using(alias).values_list("pk", "text")
        keys[alias] = {"raw": [], "django": []}
        for pk, text in rows:
            keys[alias]["raw" if text == "raw" else "django"].append(pk)
    for connection in connections.all():
        connection.close()
    slots = {alias: sorted({decode(pk).worker_id for pk in keys[alias]["raw"]}) for alias in SHARDS}
    return {
        "errors": errors,
        "counts": {alias: {k: len(v) for k, v in keys[alias].items()} for alias in SHARDS},
        "shared": len(
            {pk for path in keys["shard1"].values() for pk in path}
            & {pk for path in keys["shard2"].values() for pk in path}
        ),
        "raw_slots": slots,
        "django_slots": sorted(
            {decode(pk).worker_id for alias in SHARDS for pk in keys[alias]["django"]}
        ),
        "checks": {alias: _check(alias) for alias in ("default", *SHARDS)},
    }


def shard_first() -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import DatabaseError, connections

    seen: dict[str, Any] = {}
    call_command("migrate", database="shard1", verbosity=0)
    try:
        with connections["shard1"].cursor() as cursor:
            cursor.execute("INSERT INTO keys_app_note (text) VALUES ('raw')")
        seen["before"] = "issued"
    except DatabaseError as exc:
        seen["before"] = str(exc)
    seen["check_before"] = _check("shard1")
    # With its system checks, as manage.py runs it (call_command skips them): the check of
    # the shard must not stop the migrate that its hint says to run.
    call_command("migrate", database="default", verbosity=0, skip_checks=False)
    call_command("migrate", database="shard1", verbosity=0, skip_checks=False)
    with connections["shard1"].cursor() as cursor:
        cursor.execute("INSERT INTO keys_app_note (text) VALUES ('raw')")
        cursor.execute("SELECT id FROM keys_app_note")
        seen["after"] = [row[0] for row in cursor.fetchall()]
    seen["check_after"] = _check("shard1")
    for connection in connections.all():
        connection.close()
    return seen


def main(scenario: str) -> dict[str, Any]:
    import django

    names = [conf["NAME"] for conf in DATABASES.values()]
    mysql = DATABASES["default"]["ENGINE"].endswith("mysql")
    # PostgreSQL: the allocator's own connection may still be open.
    drop = [f"DROP DATABASE IF EXISTS {n}" + ("" if mysql else " WITH (FORCE)") for n in names]
    server_sql(drop)
    server_sql([f"CREATE DATABASE {name}" for name in names])
    try:
        django.setup()
        return {"in_order": in_order, "shard_first": shard_first}[scenario]()
    finally:
        from django_snowflake import runtime

        runtime.reset()  # releases the process's slot while its database still exists
        server_sql(drop)


if __name__ == "__main__":
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.shards_project"
    print(json.dumps(main(sys.argv[1])))
