"""The documented recipe (docs/migrating.rst), run on a populated table with foreign keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from io import StringIO

import pytest
from django.apps.registry import Apps
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import override_settings

APP = "migrations_app"
BEFORE, AFTER = (APP, "0001_initial"), (APP, "0002_snowflake_keys")


@pytest.fixture
def migrate(transactional_db: None) -> Iterator[Callable[[tuple[str, str]], Apps]]:
    """Migrate the app to a node and return the historical models there; unmigrate after."""
    applied: list[tuple[str, str]] = []

    def to(node: tuple[str, str]) -> Apps:
        executor = MigrationExecutor(connection)
        executor.migrate([node])
        applied.append(node)
        return executor.loader.project_state(node).apps

    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, f"tests.{APP}"]):
        yield to
        if applied:
            # The reverse of 0002 turns keys back into int columns: empty them first.
            state = MigrationExecutor(connection).loader.project_state(applied[-1]).apps
            state.get_model(APP, "Child").objects.all().delete()
            state.get_model(APP, "Parent").objects.all().delete()
            MigrationExecutor(connection).migrate([(APP, None)])


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite rebuilds the tables; the test below covers it"
)
def test_sql_of_the_migration_drops_auto_increment(migrate: Callable[..., Apps]) -> None:
    migrate(BEFORE)  # MySQL's schema editor reads the constraints of the existing tables
    out = StringIO()
    call_command("sqlmigrate", APP, "0002", stdout=out)
    sql = out.getvalue().upper()
    assert "BIGINT" in sql
    if connection.vendor == "postgresql":
        assert sql.count("DROP IDENTITY") == 2
    assert "AUTO_INCREMENT" not in sql and "ADD GENERATED" not in sql


def test_rows_and_relations_survive_and_new_ids_are_above_the_old(
    migrate: Callable[..., Apps],
) -> None:
    old = migrate(BEFORE)
    Parent, Child = old.get_model(APP, "Parent"), old.get_model(APP, "Child")
    parents = [Parent.objects.create(name=f"p{i}") for i in range(3)]
    for i in range(5):
        Child.objects.create(name=f"c{i}", parent=parents[i % 3])
    before = sorted(Child.objects.values_list("pk", "name", "parent_id", "parent__name"))
    old_max = max(Parent.objects.values_list("pk", flat=True))

    new = migrate(AFTER)
    Parent, Child = new.get_model(APP, "Parent"), new.get_model(APP, "Child")
    assert sorted(Child.objects.values_list("pk", "name", "parent_id", "parent__name")) == before
    assert sorted(Parent.objects.values_list("pk", flat=True)) == [p.pk for p in parents]

    # New rows get Snowflake keys in Python, above every old key, and relate as before.
    parent = Parent.objects.create(name="new")
    child = Child.objects.create(name="new child", parent=parent)
    assert parent.pk > 2**40 > old_max and child.pk > 2**40
    assert Child.objects.get(pk=child.pk).parent.name == "new"
    assert list(Parent.objects.order_by("pk").values_list("name", flat=True))[-1] == "new"

    # No auto-increment is left: an INSERT that leaves Parent's key (a SnowflakeField) out
    # gets a Snowflake from the database's function, above every old key, like Child's.
    table = Parent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {connection.ops.quote_name(table)} (name) VALUES ('x')")
    assert Parent.objects.get(name="x").pk > 2**40
    # The foreign key is still enforced.
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Child._meta.db_table)
    assert [c["foreign_key"] for c in constraints.values() if c["foreign_key"]] == [(table, "id")]
    with pytest.raises(DatabaseError), transaction.atomic():
        Child.objects.create(name="orphan", parent_id=parent.pk + 1)

    # Child's key is a SnowflakeAutoField now: the database still makes keys for INSERTs that
    # leave it out (old code, raw SQL), Snowflakes above every old key.
    child_table = connection.ops.quote_name(Child._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {child_table} (name, parent_id) VALUES ('raw', %s)", [parent.pk]
        )
    assert Child.objects.get(name="raw").pk > 2**40
