"""A django-tenants project: one PostgreSQL database, one schema per tenant.

``python -m tests.tenants_project`` (PostgreSQL only) creates a database of its own,
runs ``migrate_schemas --shared``, creates six tenants (each ``save()`` migrates its schema, as
django-tenants does), runs the two scenarios below, one after the other, prints what it saw as JSON and drops the database.
``SNOWFLAKE_TENANTS_LISTS`` is ``shared`` (``django_snowflake`` in ``SHARED_APPS`` only) or
``both`` (in ``TENANT_APPS`` too). Run by tests/test_tenants.py in a subprocess: the project's
settings are fixed when Django starts.

- ``keys``: raw INSERTs in four schemas at once (a thread and a connection each) while four
  processes, one per tenant, add users to groups with contrib.auth (whose many-to-many rows take
  their keys from the database); every key of every schema is collected; then a second function
  is planted in another schema and ``check --database default`` is run.
- ``repair``: four tenant schemas get a function and sequences of their own under the
  database's one slot, as migrations before 0005 installed them, and their tables default to
  it; one copy runs ahead of the clock; then ``migrate_schemas`` runs, with nothing to apply.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from tests.settings import *  # noqa: F403
from tests.settings import RUN, get_db_conf
from tests.shards_project import raw_keys, server_sql

BOTH = os.environ.get("SNOWFLAKE_TENANTS_LISTS") == "both"
DATABASES = {
    "default": {
        **copy.deepcopy(get_db_conf()),
        "ENGINE": "django_tenants.postgresql_backend",
        "NAME": f"snowflake_tenants_{RUN}",
    }
}
SHARED_APPS = [
    "django_tenants",
    "tests.tenants_app",
    "django.contrib.contenttypes",
    "django_snowflake",
]
TENANT_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "tests.keys_app",
    *(["django_snowflake"] if BOTH else []),
]
INSTALLED_APPS = SHARED_APPS + [app for app in TENANT_APPS if app not in SHARED_APPS]
TENANT_MODEL = "tenants_app.Client"
TENANT_DOMAIN_MODEL = "tenants_app.Domain"
DATABASE_ROUTERS = ["django_tenants.routers.TenantSyncRouter"]
MIDDLEWARE: list[str] = []
DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"
SNOWFLAKE = {"DATABASE": "default"}
ROOT_URLCONF = "tests.tenants_project"
urlpatterns: list[Any] = []

TENANTS = [f"tenant{i}" for i in range(6)]
BUSY = TENANTS[:4]  # the schemas written at once
SECONDS = 2.0
# The keyed tables of a tenant: raw SQL's, and contrib.auth's many-to-many rows.
TABLES = ("keys_app_note", "auth_user_groups")


def _sql(query: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


def _build() -> None:
    from django.core.management import call_command
    from django.utils import timezone

    from django_snowflake.conf import get_layout
    from django_snowflake.models import WorkerNode
    from tests.tenants_app.models import Client

    # Another database's function holds the top slot: this one's is not the first a lease of
    # an empty table would take (a tenant schema's own WorkerNode table, with both lists).
    call_command("migrate_schemas", "django_snowflake", "0002", shared=True, verbosity=0)
    now = timezone.now()
    WorkerNode.objects.create(
        worker_id=get_layout().max_worker_id,
        datacenter_id=0,
        host_name="(database)",  # as database_slots writes a database's slot
        label="database:elsewhere",
        process_id=0,
        launched_at=now,
        heartbeat_at=now,
        lease_expires_at=datetime(9999, 12, 31, tzinfo=UTC),
        last_timestamp=0,
        layout=get_layout().fingerprint,
        token="elsewhere",
    )
    call_command("migrate_schemas", shared=True, verbosity=0)
    for schema in TENANTS:
        Client(schema_name=schema, name=schema).save(verbosity=0)  # migrates the schema


def _functions() -> list[str]:
    return [
        row[0]
        for row in _sql(
            "SELECT s.nspname FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace "
            "WHERE p.proname = 'django_snowflake_id' ORDER BY 1"
        )
    ]


def _slot() -> list[int]:
    """The slot the comment of the function in public names (read with SQL alone, so the
    project runs on the code of any commit)."""
    (comment,) = _sql(
        "SELECT obj_description(p.oid, 'pg_proc') FROM pg_proc p JOIN pg_namespace s "
        "ON s.oid = p.pronamespace WHERE p.proname = 'django_snowflake_id' AND s.nspname = 'public'"
    )[0]
    found = re.search(r"slot=(\d+)/(\d+)", comment)
    return [int(found.group(1)), int(found.group(2))] if found else []


def _sequences() -> list[str]:
    return [
        f"{schema}.{name}"
        for schema, name in _sql(
            "SELECT s.nspname, c.relname FROM pg_class c JOIN pg_namespace s "
            "ON s.oid = c.relnamespace WHERE c.relkind = 'S' "
            "AND c.relname LIKE 'django_snowflake_id%%' ORDER BY 1, 2"
        )
    ]


def _defaults() -> dict[str, int]:
    """The schemas of the functions the tenants' keyed columns default to (read from
    pg_depend: information_schema deparses names on the reader's search_path), and how many
    columns each."""
    return dict(
        _sql(
            "SELECT fs.nspname, count(*) FROM pg_attrdef ad "
            "JOIN pg_class c ON c.oid = ad.adrelid "
            "JOIN pg_namespace s ON s.oid = c.relnamespace "
            "JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid "
            "AND d.refclassid = 'pg_proc'::regclass "
            "JOIN pg_proc p ON p.oid = d.refobjid "
            "JOIN pg_namespace fs ON fs.oid = p.pronamespace "
            "WHERE s.nspname LIKE 'tenant%%' AND c.relname = ANY(%s) GROUP BY 1",
            [list(TABLES)],
        )
    )


def _keys() -> dict[str, list[int]]:
    """Every key of every tenant's keyed tables, per schema."""
    keys: dict[str, list[int]] = {}
    for schema in TENANTS:
        keys[schema] = [
            key for table in TABLES for (key,) in _sql(f'SELECT id FROM "{schema}".{table}')
        ]
    return keys


def _check() -> str:
    """What ``manage.py check --database default`` writes."""
    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def worker(schema: str, seconds: float) -> None:
    """Users added to groups in tenant ``schema`` with the plain ORM, for ``seconds``."""
    from django.contrib.auth.models import Group, User
    from django_tenants.utils import schema_context

    with schema_context(schema):
        groups = [Group.objects.create(name=f"group {i}") for i in range(3)]
        stop = time.monotonic() + seconds
        n = 0
        while time.monotonic() < stop:
            user = User.objects.create(username=f"user {n}")
            user.groups.add(*groups)
            n += 1


def keys() -> dict[str, Any]:
    from django.db import connection

    from django_snowflake import decode
    from django_snowflake.models import WorkerNode

    env = {**os.environ, "SNOWFLAKE_TEST_RUN": RUN}
    workers = [
        subprocess.Popen([sys.executable, "-m", "tests.tenants_project", "worker", schema], env=env)
        for schema in BUSY
    ]
    errors = raw_keys("default", SECONDS, list(BUSY))
    errors += [f"worker exited {w.wait()}" for w in workers if w.wait()]
    connection.set_schema_to_public()  # type: ignore[attr-defined]
    found = _keys()
    keys_made = [key for schema in BUSY for key in found[schema]]
    seen: dict[str, Any] = {
        "errors": errors,
        "counts": {schema: len(found[schema]) for schema in TENANTS},
        "groups": {
            schema: _sql(f'SELECT count(*) FROM "{schema}".auth_user_groups')[0][0]
            for schema in BUSY
        },
        "shared": sum(
            len(set(found[a]) & set(found[b]))
            for i, a in enumerate(TENANTS)
            for b in TENANTS[i + 1 :]
        ),
        "functions": _functions(),
        "sequences": _sequences(),
        "defaults": _defaults(),
        "check": _check(),
        # The function's slot, and the workers of the keys it made: one, the database's.
        "slot": _slot(),
        "workers": sorted({decode(key).worker_id for key in keys_made}),
        "database_slots": list(
            WorkerNode.objects.filter(label__startswith="database").values_list(
                "label", "worker_id"
            )
        ),
    }
    _sql("CREATE SCHEMA planted")
    _sql(
        "CREATE FUNCTION planted.django_snowflake_id() RETURNS bigint LANGUAGE sql "
        "AS 'SELECT 1::bigint'"
    )
    seen["check_planted"] = _check()
    _sql("DROP SCHEMA planted CASCADE")
    return seen


def _plant_old_copies(schemas: list[str]) -> None:
    """What migrations before 0005 left: a function and sequences in each of ``schemas`` (a
    migrate ran there), under the database's one slot, unpinned, their tables defaulting to
    it. Made with today's statements for another schema, so the copies issue as the survivor
    does."""
    from django.test import override_settings

    from django_snowflake.conf import get_layout
    from django_snowflake.vendors import installed_slot
    from django_snowflake.vendors.postgresql import install_sql

    exists, slot = installed_slot("default")
    assert exists and slot is not None
    for schema in schemas:
        with override_settings(SNOWFLAKE={**SNOWFLAKE, "FUNCTION_SCHEMA": schema}):
            for statement in install_sql(get_layout(), slot, alias="default"):
                _sql(statement)
        _sql(f'ALTER FUNCTION "{schema}".django_snowflake_id() RESET search_path')
        for table in TABLES:
            _sql(
                f'ALTER TABLE "{schema}".{table} ALTER COLUMN id '
                f'SET DEFAULT "{schema}".django_snowflake_id()'
            )


def _max_key() -> int:
    return max(max(found, default=0) for found in _keys().values())


def repair() -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connection

    from django_snowflake.conf import get_layout

    if _functions() == ["public"]:  # else the code under test made copies itself
        _plant_old_copies(BUSY)
    layout = get_layout()
    # One copy runs 3 s ahead of the clock: the survivor must skip past it, not to the clock.
    ahead = int((time.time() * 1000 - layout.epoch_ms) // layout.time_unit_ms) + 3000
    _sql(
        'SELECT setval(%s, (%s::bigint << %s) - (SELECT last_value FROM "tenant2".'
        "django_snowflake_id_counter))",
        ['"tenant2".django_snowflake_id_base', ahead, layout.sequence_bits],
    )
    errors = raw_keys("default", 0.5, list(TENANTS))
    connection.set_schema_to_public()  # type: ignore[attr-defined]
    seen: dict[str, Any] = {
        "functions_before": _functions(),
        "check_before": _check(),
    }
    before = _max_key()
    started = time.monotonic()
    call_command("migrate_schemas", verbosity=0)
    seen["repair_seconds"] = round(time.monotonic() - started, 2)
    connection.set_schema_to_public()  # type: ignore[attr-defined]
    seen["functions"] = _functions()
    seen["sequences"] = _sequences()
    seen["defaults"] = _defaults()
    seen["check"] = _check()
    previous = {schema: set(found) for schema, found in _keys().items()}
    errors += raw_keys("default", 0.5, list(TENANTS))
    connection.set_schema_to_public()  # type: ignore[attr-defined]
    after = {
        key for schema, found in _keys().items() for key in found if key not in previous[schema]
    }
    seen["errors"] = errors
    seen["new_keys"] = len(after)
    seen["new_keys_below_before"] = sum(1 for key in after if key <= before)
    return seen


def main() -> dict[str, Any]:
    import django

    name = DATABASES["default"]["NAME"]
    drop = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    server_sql([drop, f"CREATE DATABASE {name}"])
    try:
        django.setup()
        _build()
        return {"keys": keys(), "repair": repair()}
    finally:
        from django.db import connections

        from django_snowflake import runtime

        runtime.reset()  # releases the process's slot while its database still exists
        for connection in connections.all():
            connection.close()
        server_sql([drop])


if __name__ == "__main__":
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.tenants_project"
    if sys.argv[1:2] == ["worker"]:
        import django

        django.setup()
        try:
            worker(sys.argv[2], SECONDS)
        finally:
            from django_snowflake import runtime

            runtime.reset()
    else:
        print(json.dumps(main()))
