"""bulk_load: the same rows as bulk_create, through each database's loader, all or nothing."""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
import zoneinfo
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import DatabaseError, DataError, IntegrityError, connection, models, transaction
from django.test import override_settings
from django.test.utils import isolate_apps
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_snowflake import generate
from django_snowflake.bulk import BulkLoadError, bulk_load
from django_snowflake.bulk import plan as bulk_plan
from django_snowflake.bulk import postgresql as bulk_postgresql
from django_snowflake.bulk.load import loader_class
from django_snowflake.bulk.mysql import MySQLLoader
from django_snowflake.bulk.plan import Plan
from django_snowflake.bulk.postgresql import PostgreSQLLoader
from django_snowflake.bulk.sqlite import SQLiteLoader
from django_snowflake.models import SnowflakeModel
from tests.example import manage
from tests.testapp.models import (
    CreatedTwin,
    Customer,
    Event,
    LoadedTwin,
    Order,
    OrderItem,
    Ticket,
)

VENDOR = connection.vendor
POSTGRESQL = VENDOR == "postgresql"
MYSQL = VENDOR == "mysql"

# Each backend's paths: PostgreSQL binary COPY (one buffer, or row by row) and text COPY, MariaDB LOAD DATA LOCAL INFILE
# and multi-row INSERT, SQLite executemany.
PATHS = {"postgresql": ["binary", "binary_rows", "text"], "mysql": ["load_data", "insert"]}.get(
    VENDOR, ["executemany"]
)


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Select a loader path; MariaDB's LOAD DATA needs a connection opened with local_infile."""
    name: str = request.param
    if name == "text":
        monkeypatch.setattr(PostgreSQLLoader, "_binary_types", lambda self: None)
    if name == "binary_rows":  # psycopg's write_row(), where its row formatter is not found
        monkeypatch.setattr(bulk_postgresql, "_format_row_binary", None)
    if name.startswith("binary"):
        # The twins' custom field gives str for its varchar column, as binary COPY needs;
        # without this, its table would take text COPY (test_custom_field_takes_text_copy).
        monkeypatch.setattr(bulk_postgresql, "converts_as_django", lambda field: True)
        monkeypatch.setattr(bulk_plan, "converts_as_django", lambda field: True)
    if name == "load_data":
        options = connection.settings_dict.setdefault("OPTIONS", {})
        options["local_infile"] = 1
        connection.close()
        yield name
        del options["local_infile"]
        connection.close()
        return
    yield name


def uses_binary_copy(model: type[models.Model]) -> bool:
    return PostgreSQLLoader(Plan(model, connection)).types is not None


@pytest.mark.skipif(not POSTGRESQL, reason="PostgreSQL's COPY")
def test_custom_field_takes_text_copy(db: None) -> None:
    assert not uses_binary_copy(LoadedTwin)
    assert uses_binary_copy(Order)


def uses_load_data() -> bool:
    loader = MySQLLoader(Plan(Customer, connection))
    return loader.local_infile


# Values of each column, within what every database stores (MariaDB has no NaN or infinity,
# and dates from year 1000; PostgreSQL refuses NUL in text, tested apart).
text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
floats = (
    st.floats(width=64) if POSTGRESQL else finite if MYSQL else st.floats(allow_nan=False, width=64)
)
zones = st.sampled_from(
    [datetime.UTC, zoneinfo.ZoneInfo("Europe/Paris"), zoneinfo.ZoneInfo("America/St_Johns")]
)
moments = st.datetimes(
    min_value=datetime.datetime(1000, 1, 2), max_value=datetime.datetime(9999, 12, 30)
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | text
    | st.sampled_from(["1", "1.5", "true", "null", "-0", "1e3", '{"a": 1}']),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(text.filter(lambda s: len(s) < 10), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def rows(draw: st.DrawFn, naive: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {
        "char": draw(text.filter(lambda s: len(s) <= 50)),
        "text": draw(text),
        "small": draw(st.integers(-(2**15), 2**15 - 1)),
        "integer": draw(st.integers(-(2**31), 2**31 - 1)),
        "big": draw(st.none() | st.integers(-(2**63), 2**63 - 1)),
        "positive": draw(st.integers(0, 2**31 - 1)),
        "positive_big": draw(st.integers(0, 2**63 - 1)),
        "decimal": draw(
            st.none()
            | st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=4, allow_nan=False)
        ),
        "real": draw(st.none() | floats),
        "flag": draw(st.booleans()),
        "maybe": draw(st.none() | st.booleans()),
        "day": draw(st.none() | st.dates(min_value=datetime.date(1000, 1, 1))),
        "clock": draw(st.none() | st.times()),
        "moment": draw(
            st.none() | moments if naive else st.none() | moments | moments.map(lambda d: d)
        ),
        "duration": draw(
            st.none()
            | st.timedeltas(
                min_value=datetime.timedelta(days=-30000), max_value=datetime.timedelta(30000)
            )
        ),
        # MariaDB's uuid type refuses the variants it cannot sort (bulk_create fails too).
        "uuid": draw(st.none() | (st.uuids(version=4) if MYSQL else st.uuids())),
        "blob": draw(st.none() | st.binary(max_size=40)),
        "data": draw(json_values),
        "reversed": draw(text.filter(lambda s: len(s) <= 20)),
    }
    if not naive and row["moment"] is not None and draw(st.booleans()):
        row["moment"] = row["moment"].replace(tzinfo=draw(zones))
    # db_default columns: a value, or none at all (the database's default).
    if draw(st.booleans()):
        row["db_number"] = draw(st.integers(-(2**31), 2**31 - 1))
    if draw(st.booleans()):
        row["db_word"] = draw(text.filter(lambda s: len(s) <= 10))
    return row


def normal(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def read(model: type[models.Model]) -> list[dict[str, Any]]:
    skip = {"created", "updated", "touched"}
    return [
        {key: normal(value) for key, value in row.items() if key not in skip}
        for row in model.objects.order_by("pk").values()
    ]


def load_twins(specs: list[dict[str, Any]], customers: list[Customer], seed: int) -> None:
    loaded, created = [], []
    for n, spec in enumerate(specs):
        pk = generate()
        customer = customers[(seed + n) % len(customers)] if (seed + n) % 3 else None
        partner = customers[n] if n % 2 else None
        for target, model in ((loaded, LoadedTwin), (created, CreatedTwin)):
            target.append(model(id=pk, customer=customer, partner=partner, **spec))
    before = timezone.now() - datetime.timedelta(seconds=1)
    assert bulk_load(LoadedTwin, iter(loaded), batch_size=7) == len(loaded)
    CreatedTwin.objects.bulk_create(created)
    assert all(not obj._state.adding and obj._state.db == "default" for obj in loaded)
    assert read(LoadedTwin) == read(CreatedTwin)
    for row in LoadedTwin.objects.values("created", "updated", "touched"):
        assert row["created"] >= before
        assert row["updated"] >= before


PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.filterwarnings("ignore:DateTimeField .* received a naive datetime")
@PROPERTY
@given(specs=st.lists(rows(), max_size=20), seed=st.integers(0, 10))
def test_twins_read_back_identical(
    transactional_db: None, path: str, specs: list[dict[str, Any]], seed: int
) -> None:
    assert uses_load_data() == (path == "load_data") or not MYSQL
    assert uses_binary_copy(LoadedTwin) == path.startswith("binary") or not POSTGRESQL
    LoadedTwin.objects.all().delete()
    CreatedTwin.objects.all().delete()
    customers = [Customer(name=f"c{n}") for n in range(20)]
    bulk_load(Customer, customers)
    load_twins(specs, customers, seed)


@PROPERTY
@given(specs=st.lists(rows(naive=True), max_size=10), seed=st.integers(0, 10))
def test_twins_without_time_zone_support(
    transactional_db: None, path: str, specs: list[dict[str, Any]], seed: int
) -> None:
    with override_settings(USE_TZ=False):
        LoadedTwin.objects.all().delete()
        CreatedTwin.objects.all().delete()
        customers = [Customer(name=f"c{n}") for n in range(10)]
        bulk_load(Customer, customers)
        load_twins(specs, customers, seed)


@pytest.mark.django_db
def test_db_default_is_the_databases() -> None:
    row = LoadedTwin()
    bulk_load(LoadedTwin, [row, LoadedTwin(db_number=5)])
    assert sorted(LoadedTwin.objects.values_list("db_number", flat=True)) == [5, 42]
    assert set(LoadedTwin.objects.values_list("db_word", flat=True)) == {"dbdefault"}


def test_nul_in_text_fails_as_bulk_create_does(transactional_db: None, path: str) -> None:
    """PostgreSQL refuses NUL in text; the others store it. bulk_load does the same."""
    created = CreatedTwin(text="a\x00b")
    loaded = LoadedTwin(id=created.pk, text="a\x00b")
    if POSTGRESQL:
        with pytest.raises(DataError):
            CreatedTwin.objects.bulk_create([created])
        with pytest.raises(DataError, match="row 0"):
            bulk_load(LoadedTwin, [loaded])
        assert not LoadedTwin.objects.exists()
    else:
        CreatedTwin.objects.bulk_create([created])
        bulk_load(LoadedTwin, [loaded])
        assert read(LoadedTwin) == read(CreatedTwin)


# Parents, then children, in one transaction.


def test_parents_then_children_in_one_transaction(transactional_db: None, path: str) -> None:
    customers = [Customer(name=f"customer {n}") for n in range(30)]
    orders = [Order(customer=customers[n % 30], total=decimal.Decimal(n)) for n in range(100)]
    items = [OrderItem(order=order, sku=f"SKU-{n}") for order in orders for n in range(3)]
    done: list[int] = []
    with transaction.atomic():
        assert Customer.objects.bulk_load(customers) == 30
        assert Order.objects.bulk_load(orders, batch_size=40, progress=done.append) == 100
        assert bulk_load(OrderItem.objects.all(), items) == 300
    assert done == [40, 80, 100]
    assert Order.objects.count() == 100
    assert OrderItem.objects.filter(order__customer=customers[3]).count() == 4 * 3
    assert all(not obj._state.adding for obj in [*customers, *orders, *items])


def test_a_failing_child_rolls_back_only_its_own_load(transactional_db: None, path: str) -> None:
    customer = Customer(name="kept")
    bulk_load(Customer, [customer])
    orders = [Order(customer=customer) for _ in range(5)]
    orders[3].customer_id = generate()  # no such customer
    with pytest.raises(IntegrityError, match=r"bulk_load of testapp\.Order rolled back") as info:
        Order.objects.bulk_load(orders)
    assert str(orders[3].pk) in str(info.value)
    assert not Order.objects.exists()
    assert Customer.objects.count() == 1


# Errors: the whole load rolls back, and the error names the row.


def test_duplicate_key_names_the_row(transactional_db: None, path: str) -> None:
    existing = Customer(name="first")
    bulk_load(Customer, [existing])
    again = Customer(id=existing.pk, name="again")
    objs = [Customer(name=f"c{n}") for n in range(12)]
    objs.insert(9, again)
    with pytest.raises(IntegrityError, match=rf"row 9 \(pk {existing.pk}\)"):
        bulk_load(Customer, objs, batch_size=5)
    assert list(Customer.objects.values_list("name", flat=True)) == ["first"]


def test_duplicate_inside_the_load_names_the_row(transactional_db: None, path: str) -> None:
    first = Customer(name="a")
    objs = [first, Customer(name="b"), Customer(id=first.pk, name="c")]
    with pytest.raises(IntegrityError, match=rf"row 2 \(pk {first.pk}\)"):
        bulk_load(Customer, objs)
    assert not Customer.objects.exists()


@pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite does not enforce max_length")
def test_value_too_long_names_the_row(transactional_db: None, path: str) -> None:
    objs = [Customer(name="x") for _ in range(4)]
    objs[2].name = "y" * 101
    with pytest.raises(DataError, match=rf"row 2 \(pk {objs[2].pk}\)"):
        bulk_load(Customer, objs)
    assert not Customer.objects.exists()


def test_missing_foreign_key_names_the_row(transactional_db: None, path: str) -> None:
    missing = generate()
    orders = [Order(customer_id=missing)]
    with pytest.raises(IntegrityError, match=f"pk {orders[0].pk}"):
        bulk_load(Order, orders)
    assert not Order.objects.exists()


@pytest.mark.parametrize("optional", [True, False])
def test_a_refused_savepoint(
    transactional_db: None, monkeypatch: pytest.MonkeyPatch, optional: bool
) -> None:
    # MariaDB refuses savepoints once a transaction has touched a non-transactional table:
    # its loader goes on without them; on the others a refusal fails the load.
    assert MySQLLoader.savepoints_optional
    assert not (PostgreSQLLoader.savepoints_optional or SQLiteLoader.savepoints_optional)
    monkeypatch.setattr(loader_class(connection), "savepoints_optional", optional)

    def refuse() -> str:
        raise DatabaseError("savepoint refused")

    monkeypatch.setattr(connection, "savepoint", refuse)
    objs = [Customer(name=f"c{n}") for n in range(3)]
    if optional:
        assert bulk_load(Customer, objs) == 3
        return
    with pytest.raises(DatabaseError, match="savepoint refused"):
        bulk_load(Customer, objs)
    assert not Customer.objects.exists()


# Refusals, before anything is written.


@pytest.mark.django_db
def test_refuses_a_key_numbered_by_the_database() -> None:
    with pytest.raises(BulkLoadError, match="numbered by the database"):
        bulk_load(Ticket, [Ticket(code=1)])


@isolate_apps("tests.testapp")
def test_refuses_multi_table_inheritance() -> None:
    class Parent(SnowflakeModel):
        class Meta:
            app_label = "testapp"

    class Child(Parent):
        class Meta:
            app_label = "testapp"

    with pytest.raises(BulkLoadError, match="multi-table inheritance"):
        bulk_load(Child, [Child()])


@pytest.mark.django_db
def test_refuses_an_instance_without_a_key() -> None:
    with isolate_apps("tests.testapp"):

        class Keyed(models.Model):
            code = models.IntegerField(primary_key=True)

            class Meta:
                app_label = "testapp"

            def __str__(self) -> str:
                return str(self.code)

        with pytest.raises(BulkLoadError, match="row 1 has no primary key"):
            bulk_load(Keyed, [Keyed(code=1), Keyed()])


@pytest.mark.django_db
def test_refuses_another_models_instance_and_bad_arguments() -> None:
    with pytest.raises(BulkLoadError, match="row 0 is"):
        bulk_load(Customer, [Order()])
    with pytest.raises(BulkLoadError, match="batch_size"):
        bulk_load(Customer, [], batch_size=0)
    with pytest.raises(TypeError, match="model class, manager or queryset"):
        bulk_load("Customer", [])


@pytest.mark.django_db
def test_snowflake_auto_field_keys_are_made_as_bulk_create_makes_them() -> None:
    events = [Event(name=f"e{n}") for n in range(3)]
    assert Event.objects.bulk_load(events, batch_size=2) == 3
    assert all(event.pk for event in events)
    assert sorted(Event.objects.values_list("pk", flat=True)) == sorted(e.pk for e in events)


@pytest.mark.django_db
def test_generator_streams_in_batches() -> None:
    seen: list[int] = []
    made = (Customer(name=str(n)) for n in range(2_500))
    assert bulk_load(Customer, made, batch_size=1_000, progress=seen.append) == 2_500
    assert seen == [1_000, 2_000, 2_500]
    assert Customer.objects.count() == 2_500
    assert uuid  # the module is used by the strategies


@pytest.mark.slow
@pytest.mark.skipif(VENDOR != "sqlite", reason="the example project runs on SQLite")
def test_seed_demo_loads_orders_with_a_progress_bar(tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite3"
    manage("migrate", db=db)
    out = manage("seed_demo", "--orders", "25000", db=db).stdout
    assert "] 10,000/25,000 orders (40%" in out
    assert "] 25,000/25,000 orders (100%" in out
    assert "Loaded 25,000 orders and " in out
    counted = manage(
        "shell", "-c", "from shop.models import Order; print(Order.objects.count())", db=db
    ).stdout
    assert counted.split()[-1] == str(25_000 + 12)
