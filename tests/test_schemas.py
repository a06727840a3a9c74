"""One function per PostgreSQL database, whatever the schema of a migrate or a caller
(docs/schemas.rst): the checks W052 and W053, the repair of migration 0005, a function schema
of its own. The django-tenants project is tests/test_tenants.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import override_settings

from django_snowflake.checks import check_database_functions
from django_snowflake.conf import get_layout, get_settings
from django_snowflake.vendors import installed_slot
from django_snowflake.vendors.postgresql import install_sql

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's schemas"),
    pytest.mark.django_db(transaction=True),
]


def sql(query: str, params: object = None) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


def functions() -> list[str]:
    return [
        str(name)
        for (name,) in sql(
            "SELECT s.nspname FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace "
            "WHERE p.proname = 'django_snowflake_id' ORDER BY 1"
        )
    ]


def check_ids() -> list[str]:
    return [message.id or "" for message in check_database_functions(databases=["default"])]


@pytest.fixture
def schema() -> Iterator[str]:
    sql("CREATE SCHEMA oldcopy")
    try:
        yield "oldcopy"
    finally:
        sql("DROP SCHEMA IF EXISTS oldcopy CASCADE")


def test_W052_W053_a_function_planted_in_another_schema(schema: str) -> None:
    assert check_ids() == []
    sql(f"CREATE FUNCTION {schema}.django_snowflake_id() RETURNS bigint LANGUAGE sql AS 'SELECT 1'")
    ids = check_database_functions(databases=["default"])
    assert [m.id for m in ids] == ["django_snowflake.W052", "django_snowflake.W053"]
    assert "in schemas oldcopy, public" in ids[0].msg
    assert "in schema oldcopy does not pin" in ids[1].msg
    assert "manage.py migrate --database=default" in (ids[0].hint or "")


def test_W053_an_unpinned_function_is_reinstalled_by_migrate() -> None:
    sql('ALTER FUNCTION "public".django_snowflake_id() RESET search_path')
    assert check_ids() == ["django_snowflake.W053"]
    call_command("migrate", verbosity=0)  # nothing to apply: post_migrate repairs
    assert check_ids() == []
    assert sql("SELECT proconfig FROM pg_proc WHERE proname = 'django_snowflake_id'") == [
        (["search_path=pg_catalog, pg_temp"],)
    ]


def plant_copy(schema: str) -> None:
    """A function and sequences of its own in ``schema`` under the database's slot, and a
    table defaulting to it: what a migrate in that schema made before 0005."""
    exists, slot = installed_slot("default")
    assert exists and slot is not None
    with override_settings(SNOWFLAKE={**get_settings(), "FUNCTION_SCHEMA": schema}):
        for statement in install_sql(get_layout(), slot, alias="default"):
            sql(statement)
    sql(
        f"CREATE TABLE {schema}.note (id bigint PRIMARY KEY DEFAULT {schema}.django_snowflake_id())"
    )


def test_0005_repairs_a_copy_and_sqlmigrate_prints_what_it_runs(schema: str) -> None:
    plant_copy(schema)
    layout = get_layout()
    ahead = int((time.time() * 1000 - layout.epoch_ms) // layout.time_unit_ms) + 3000
    sql(
        f"SELECT setval('{schema}.django_snowflake_id_base', (%s::bigint << %s) - "
        f"(SELECT last_value FROM {schema}.django_snowflake_id_counter))",
        [ahead, layout.sequence_bits],
    )
    sql(f"INSERT INTO {schema}.note DEFAULT VALUES")
    (before,) = sql(f"SELECT max(id) FROM {schema}.note")[0]
    printed = StringIO()
    call_command("sqlmigrate", "django_snowflake", "0005", stdout=printed)
    assert (
        'ALTER TABLE "oldcopy"."note" ALTER COLUMN "id" SET DEFAULT "public"' in printed.getvalue()
    )
    assert 'DROP FUNCTION "oldcopy".django_snowflake_id()' in printed.getvalue()
    assert functions() == ["oldcopy", "public"]  # sqlmigrate ran nothing

    call_command("migrate", "django_snowflake", "0004", verbosity=0)
    call_command("migrate", "django_snowflake", "0005", verbosity=0)
    assert functions() == ["public"]
    assert sql(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
        "WHERE s.nspname = 'oldcopy' AND c.relkind = 'S'"
    ) == [(0,)]
    sql(f"INSERT INTO {schema}.note DEFAULT VALUES")
    (after,) = sql(f"SELECT max(id) FROM {schema}.note")[0]
    assert isinstance(after, int) and isinstance(before, int) and after > before
    # Idempotent: nothing left to repair, nothing printed.
    again = StringIO()
    call_command("sqlmigrate", "django_snowflake", "0005", stdout=again)
    assert "ALTER TABLE" not in again.getvalue() and "DROP" not in again.getvalue()


def test_a_function_schema_of_its_own_is_created_and_tables_in_other_schemas_default_to_it(
    schema: str,
) -> None:
    """A migrate whose search_path starts elsewhere (a tenant's, OPTIONS) installs nothing
    there."""
    from django.db import models
    from django.test.utils import isolate_apps

    from django_snowflake.fields import SnowflakeAutoField

    with isolate_apps("tests.testapp"):

        class Elsewhere(models.Model):
            id = SnowflakeAutoField(primary_key=True)

            class Meta:
                app_label = "testapp"

            def __str__(self) -> str:
                return str(self.pk)

    own = {**get_settings(), "FUNCTION_SCHEMA": "snowflake_own"}
    try:
        with override_settings(SNOWFLAKE=own):
            sql(f"SET search_path = {schema}, public")
            with connection.schema_editor() as editor:
                editor.create_model(Elsewhere)
            sql(f"INSERT INTO {schema}.testapp_elsewhere DEFAULT VALUES")
            assert sql(f"SELECT count(*) FROM {schema}.testapp_elsewhere") == [(1,)]
            assert "snowflake_own" in functions() and schema not in functions()
            (default,) = sql(
                "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef "
                f"WHERE adrelid = '{schema}.testapp_elsewhere'::regclass"
            )[0]
            assert default == "snowflake_own.django_snowflake_id()"
            assert check_ids() == ["django_snowflake.W052"]  # public's is the other copy now
    finally:
        sql("SET search_path = public")
        sql("DROP SCHEMA IF EXISTS snowflake_own CASCADE")
