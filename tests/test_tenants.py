"""One generator per database, whatever its schemas: a real django-tenants project
(tests/tenants_project.py, in a subprocess) with six tenants, ``django_snowflake`` in
``SHARED_APPS`` only and in both lists (docs/schemas.rst)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from harness.processes import json_report

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="django-tenants runs on PostgreSQL only"
)

# What tests/tenants_project.py plants: another database's function holds the top slot.
SLOT = [1022, 0]


@pytest.fixture(scope="module", params=["shared", "both"])
def seen(request: pytest.FixtureRequest) -> dict[str, Any]:
    result: dict[str, Any] = json_report(
        "tests.tenants_project",
        cwd=ROOT,
        settings="tests.tenants_project",
        SNOWFLAKE_TENANTS_LISTS=request.param,
    )
    return result


def test_tenant_schemas_share_no_key_raw_or_from_contrib_auth(seen: dict[str, Any]) -> None:
    keys = seen["keys"]
    assert keys["errors"] == []
    for schema in ("tenant0", "tenant1", "tenant2", "tenant3"):
        assert keys["counts"][schema] > 100
        assert keys["groups"][schema] > 30  # user.groups.add(), three rows a user
    assert keys["shared"] == 0
    # Every key the database made, in any schema, is of its one slot.
    assert keys["slot"] == SLOT and keys["workers"] == SLOT[:1]
    assert ["database:default", SLOT[0]] in keys["database_slots"]


def test_the_database_has_one_function_and_one_set_of_sequences(seen: dict[str, Any]) -> None:
    keys = seen["keys"]
    assert keys["functions"] == ["public"]
    assert keys["sequences"] == [
        f"public.django_snowflake_id_{name}"
        for name in ("anchor", "base", "counter", "incarnation")
    ]
    # Six tenants, two keyed tables each, all defaulting to the one function.
    assert keys["defaults"] == {"public": 12}
    assert keys["check"] == "System check identified no issues (0 silenced).\n"


def test_check_reports_a_function_planted_in_another_schema(seen: dict[str, Any]) -> None:
    planted = seen["keys"]["check_planted"]
    assert (
        "(django_snowflake.W052) Database default has 2 django_snowflake_id() functions, in "
        "schemas planted, public" in planted
    )
    assert "(django_snowflake.W053)" in planted and "in schema planted" in planted
    assert "manage.py migrate --database=default" in planted


def test_migrate_repairs_functions_made_in_tenant_schemas(seen: dict[str, Any]) -> None:
    repair = seen["repair"]
    assert repair["functions_before"] == ["public", "tenant0", "tenant1", "tenant2", "tenant3"]
    assert "django_snowflake.W052" in repair["check_before"]
    assert repair["functions"] == ["public"]
    assert all(name.startswith("public.") for name in repair["sequences"])
    assert repair["defaults"] == {"public": 12}
    assert repair["check"] == "System check identified no issues (0 silenced).\n"
    assert repair["errors"] == []
    # Past every key of every copy, the one that ran 3 s ahead of the clock included.
    assert repair["new_keys"] > 0 and repair["new_keys_below_before"] == 0
