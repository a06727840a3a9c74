from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.apps.registry import Apps
from django.core.management import call_command
from django.db import connection, models
from django.db.migrations.loader import MigrationLoader
from django.db.models.fields import NOT_PROVIDED
from django.test.utils import CaptureQueriesContext, isolate_apps, override_settings

import django_snowflake
from django_snowflake.fields import SnowflakeAutoField, SnowflakeField
from django_snowflake.forms import SnowflakeFormField
from tests.factories import EventFactory, TagFactory
from tests.testapp.models import Customer, Event, Order, OrderItem, Tag, Ticket

AUTO_INCREMENT_WORDS = ("AUTOINCREMENT", "AUTO_INCREMENT", "IDENTITY", "SERIAL")


def test_instances_get_an_id_when_built_without_the_database() -> None:
    first, second = Customer(name="a"), Customer(name="b")
    assert isinstance(first.pk, int) and isinstance(second.pk, int)
    assert 0 < first.pk < second.pk < 2**63
    # SnowflakeAutoField is AutoField's drop-in: no key before the first save.
    assert Event(name="c").pk is None


def test_the_default_is_generate_unless_one_is_given() -> None:
    assert SnowflakeField().get_default() > 0
    assert SnowflakeAutoField().get_default() is None
    assert SnowflakeField(default=lambda: 42).get_default() == 42
    assert SnowflakeField(default=None, null=True).get_default() is None


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        (SnowflakeField(), {}),
        (SnowflakeField(primary_key=True), {"primary_key": True}),
        (SnowflakeField(default=None, null=True), {"default": None, "null": True}),
        (SnowflakeAutoField(primary_key=True), {"primary_key": True}),
    ],
)
def test_deconstruct_leaves_out_the_fields_own_defaults(
    field: models.Field[int, int], expected: dict[str, object]
) -> None:
    _name, path, args, kwargs = field.deconstruct()
    assert path.startswith("django_snowflake.fields.")
    assert (args, kwargs) == ([], expected)
    rebuilt = type(field)(*args, **kwargs)
    if isinstance(field, SnowflakeAutoField):
        # No default of its own in a migration: the key is made at the INSERT.
        assert rebuilt.default is NOT_PROVIDED and rebuilt.get_default() is None
    else:
        assert rebuilt.default is (None if "default" in expected else django_snowflake.generate)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "snowflake",
    [
        {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0},
        {"WORKER_ALLOCATOR": "static", "WORKER_ID": 3, "LAYOUT": "sonyflake"},
        {"EPOCH": "2020-01-01T00:00:00Z", "WORKER_BITS": 8, "SEQUENCE_BITS": 14},
    ],
)
def test_settings_never_produce_a_migration(snowflake: dict[str, object]) -> None:
    with override_settings(SNOWFLAKE=snowflake):
        call_command("makemigrations", "--check", "--dry-run", stdout=StringIO())


@pytest.mark.parametrize("model", [Customer, Order, OrderItem, Tag, Event, Ticket])
def test_keys_and_foreign_keys_are_plain_bigints(model: type[models.Model]) -> None:
    bigint = models.BigIntegerField().db_type(connection)
    for field in model._meta.concrete_fields:
        if isinstance(field, SnowflakeField | SnowflakeAutoField | models.ForeignKey):
            assert field.db_type(connection) == bigint, field
            assert field.db_type_suffix(connection) is None, field


@pytest.mark.django_db(transaction=True)  # SQLite's schema editor refuses to run in atomic()
def test_sqlmigrate_shows_no_autoincrement_on_snowflake_tables() -> None:
    out = StringIO()
    call_command("sqlmigrate", "testapp", "0001", stdout=out)
    snowflake_tables = {"customer", "order", "orderitem", "tag", "event"}
    statements = [
        line.upper()
        for line in out.getvalue().splitlines()
        if line.startswith("CREATE TABLE")
        and line.split()[2].strip('"`').removeprefix("testapp_") in snowflake_tables
    ]
    assert len(statements) == len(snowflake_tables)
    for statement in statements:
        assert not [word for word in AUTO_INCREMENT_WORDS if word in statement], statement


@pytest.mark.django_db
def test_save_is_one_insert_without_returning() -> None:
    instance = Customer(name="x")
    pk = instance.pk
    with CaptureQueriesContext(connection) as queries:
        instance.save()
    assert len(queries) == 1
    assert queries[0]["sql"].upper().startswith("INSERT")
    assert "RETURNING" not in queries[0]["sql"].upper()
    assert Customer.objects.get(pk=pk).pk == pk


@pytest.mark.django_db
def test_an_auto_field_save_is_one_insert_carrying_the_process_key() -> None:
    # Pins Model._save_table() (Django 5.2 to 6.1): it asks get_pk_value_on_save() for the
    # unset key, then skips its UPDATE probe because the pk field has_default().
    event = Event(name="x")
    with CaptureQueriesContext(connection) as queries:
        event.save()
    assert len(queries) == 1
    sql = queries[0]["sql"].upper()
    assert sql.startswith("INSERT") and "RETURNING" not in sql
    assert str(event.pk) in sql
    parts = django_snowflake.decode(event.pk)
    generator = django_snowflake.get_generator()
    assert (parts.worker_id, parts.datacenter_id) == (
        generator.worker_id,
        generator.datacenter_id,
    )


@pytest.mark.django_db
def test_an_auto_field_save_with_a_given_key_updates_first_as_autofield() -> None:
    existing = Event.objects.create(name="x")
    with CaptureQueriesContext(connection) as queries:
        Event(id=existing.id, name="y").save()
    assert [q["sql"].split()[0].upper() for q in queries] == ["UPDATE"]
    with CaptureQueriesContext(connection) as queries:
        Event(id=4242, name="z").save()
    assert [q["sql"].split()[0].upper() for q in queries] == ["UPDATE", "INSERT"]
    with CaptureQueriesContext(connection) as queries:
        Event.objects.create(id=4343, name="w")
    assert [q["sql"].split()[0].upper() for q in queries] == ["INSERT"]


@pytest.mark.django_db
def test_bulk_create_and_many_to_many() -> None:
    events = Event.objects.bulk_create(Event(name=f"e{i}") for i in range(50))
    assert sorted(Event.objects.values_list("pk", flat=True)) == [event.pk for event in events]
    tags = TagFactory.create_batch(2)
    event = EventFactory()
    event.tags.add(*tags)
    assert set(Tag.objects.filter(events=event)) == set(tags)


# Values a bigint column may hold, across the sizes psycopg 3 types differently when a
# plain int is bound server-side (int2, int4, int8), and Snowflake IDs of today.
STORED_VALUES = [1, 40_000, 2**31 + 1, 2**63 - 1, -(2**63)]


@pytest.fixture(params=["client-side", "server-side"])
def binding(request: pytest.FixtureRequest) -> Iterator[str]:
    """Client-side binding (Django's default), and on PostgreSQL server-side binding too,
    where every parameter reaches the server typed: the fields save plain ints, no Int8."""
    if request.param == "server-side":
        if connection.vendor != "postgresql":
            pytest.skip("server-side binding is an option of PostgreSQL with psycopg 3")
        options = connection.settings_dict["OPTIONS"]
        connection.close()
        options["server_side_binding"] = True
        with connection.cursor() as cursor:
            assert type(cursor.cursor).__name__ == "ServerBindingCursor"
        yield request.param
        connection.close()
        del options["server_side_binding"]
    else:
        yield request.param


@pytest.mark.django_db(transaction=True)
def test_every_bigint_is_stored_and_read_back_by_each_save_path(binding: str) -> None:
    values = [*STORED_VALUES, django_snowflake.generate()]
    # Both fields send an int as it is (on PostgreSQL, no psycopg Int8 wrapper).
    for field in (Customer._meta.pk, Event._meta.pk, Ticket._meta.get_field("code")):
        assert field.get_db_prep_save(values[-1], connection) is values[-1]
    # save(), bulk_create (UNNEST on PostgreSQL), with a SnowflakeField key, a
    # SnowflakeAutoField key and plain SnowflakeField columns, some NULL.
    for value in values:
        Customer(pk=value, name="c").save()
    events = Event.objects.bulk_create(Event(pk=value, name="e") for value in values)
    Ticket.objects.bulk_create(
        Ticket(code=value, external_ref=None if value % 2 else value, event=event)
        for value, event in zip(values, events, strict=True)
    )
    assert sorted(Customer.objects.values_list("pk", flat=True)) == sorted(values)
    assert sorted(Event.objects.values_list("pk", flat=True)) == sorted(values)
    assert sorted(Ticket.objects.values_list("code", flat=True)) == sorted(values)
    # bulk_update (CASE ... WHEN, cast on PostgreSQL) and update() write a column.
    tickets = list(Ticket.objects.order_by("code"))
    for ticket, value in zip(tickets, reversed(sorted(values)), strict=True):
        ticket.external_ref = value
    Ticket.objects.bulk_update(tickets, ["external_ref"])
    assert list(Ticket.objects.order_by("code").values_list("external_ref", flat=True)) == sorted(
        values, reverse=True
    )
    Ticket.objects.filter(code=40_000).update(external_ref=values[-1])
    assert Ticket.objects.get(code=40_000).external_ref == values[-1]
    assert Ticket.objects.filter(external_ref=values[-1]).count() == 2
    # An upsert on a SnowflakeField column (ON CONFLICT, or ON DUPLICATE KEY on MariaDB).
    target = (
        {"unique_fields": ["code"]}
        if connection.features.supports_update_conflicts_with_target
        else {}
    )
    Ticket.objects.bulk_create(
        [Ticket(code=value, external_ref=value) for value in values],
        update_conflicts=True,
        update_fields=["external_ref"],
        **target,
    )
    assert sorted(Ticket.objects.values_list("code", "external_ref")) == [
        (v, v) for v in sorted(values)
    ]


def test_historical_models_in_migrations_still_get_ids() -> None:
    state = MigrationLoader(None, ignore_no_migrations=True).project_state(
        ("testapp", "0001_initial")
    )
    assert state.apps.get_model("testapp", "Customer")(name="x").pk > 0
    assert state.apps.get_model("testapp", "Event")(name="x").pk is None


@isolate_apps("tests.testapp")
def test_default_auto_field_switches_a_model_in_one_line() -> None:
    with override_settings(DEFAULT_AUTO_FIELD="django_snowflake.fields.SnowflakeAutoField"):

        class Note(models.Model):  # noqa: DJ008
            class Meta:
                app_label = "testapp"

    assert isinstance(Note._meta.pk, SnowflakeAutoField)
    assert Note().pk is None


def test_the_migration_recorder_keeps_an_auto_increment_key() -> None:
    # Django's migration recorder is such a model: `migrate` writes it before the worker
    # table exists, and existing projects' django_migrations tables have int keys.
    with override_settings(DEFAULT_AUTO_FIELD="django_snowflake.fields.SnowflakeAutoField"):

        class Record(models.Model):  # noqa: DJ008
            __module__ = "django.db.migrations.recorder"

            class Meta:
                apps = Apps()
                app_label = "migrations"

    pk = Record._meta.pk
    assert isinstance(pk, SnowflakeAutoField)
    assert (pk.get_internal_type(), pk.has_default(), pk.db_returning) == (
        "BigAutoField",
        False,
        True,
    )
    assert Record().pk is None
    assert Event._meta.pk.get_internal_type() == "BigIntegerField"


def test_form_fields() -> None:
    assert isinstance(Ticket._meta.get_field("code").formfield(), SnowflakeFormField)
    assert Event._meta.get_field("id").formfield() is None
    assert Customer._meta.get_field("id").editable is False


@isolate_apps("tests.testapp")
@pytest.mark.parametrize(
    ("field", "errors"),
    [
        (SnowflakeField(primary_key=True), []),
        (SnowflakeField(unique=True, default=django_snowflake.generate), []),
        (SnowflakeField(null=True, default=None), []),
        (SnowflakeField(primary_key=True, default=7), ["django_snowflake.E040"]),
        (SnowflakeField(unique=True, default=None, null=True), ["django_snowflake.E040"]),
        (SnowflakeAutoField(primary_key=True, default=0), ["django_snowflake.E040"]),
    ],
)
def test_E040_fixed_default_on_a_key(field: models.Field[int, int], errors: list[str]) -> None:
    class Keyed(models.Model):  # noqa: DJ008
        value = field

        class Meta:
            app_label = "testapp"

    assert [message.id for message in field.check()] == errors
