"""bulk_load's batches: the next one is prepared while the server still loads the one before.

On PostgreSQL a batch's COPY is left open while the next batch is prepared, and awaited
only then. The caller's iterable must still run with no COPY open (it may query the same
connection), and an error while a COPY is open must leave the connection usable.
"""

from __future__ import annotations

import tracemalloc

import pytest
from django.db import IntegrityError, connection, models
from django.test.utils import isolate_apps

from django_snowflake.bulk import BulkLoadError, bulk_load
from django_snowflake.bulk.plan import Plan
from django_snowflake.models import SnowflakeModel
from tests.conftest import model_table
from tests.testapp.models import Customer, Order


@pytest.mark.django_db
def test_the_callers_iterable_may_query_the_connection_between_batches() -> None:
    Customer.objects.bulk_create([Customer(name=f"c{n}") for n in range(10)])
    # A chunked iterator fetches its next rows while bulk_load consumes it (on PostgreSQL
    # through a server-side cursor of the same connection, which fails inside a COPY).
    customers = Customer.objects.order_by("pk").iterator(chunk_size=3)
    orders = (Order(customer=customer) for customer in customers)
    assert bulk_load(Order, orders, batch_size=4) == 10
    assert Order.objects.count() == 10


@pytest.mark.django_db
def test_an_error_while_a_batch_loads_leaves_the_connection_usable() -> None:
    # The third instance is refused while the first batch's COPY is still open.
    objs = [Customer(name="a"), Customer(name="b"), Order()]
    with pytest.raises(BulkLoadError, match="row 2 is"):
        bulk_load(Customer, objs, batch_size=2)
    assert not Customer.objects.exists()
    assert not any(obj._state.db for obj in objs)


@pytest.mark.django_db
def test_a_duplicate_in_a_batch_is_named_after_the_next_batch_was_prepared() -> None:
    first = Customer(name="a")
    objs = [first, *(Customer(name=str(n)) for n in range(4)), Customer(id=first.pk)]
    done: list[int] = []
    with pytest.raises(IntegrityError, match=rf"row 5 \(pk {first.pk}\)"):
        bulk_load(Customer, [*objs, Customer(name="z")], batch_size=3, progress=done.append)
    assert done == [3]
    assert not Customer.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_field_that_queries_while_preparing_is_loaded_batch_by_batch() -> None:
    with isolate_apps("tests.testapp"):

        class Asking(models.CharField):  # type: ignore[type-arg]
            def get_db_prep_save(self, value, connection):  # type: ignore[no-untyped-def]
                with connection.cursor() as cursor:  # fails inside a COPY
                    cursor.execute("SELECT 1")
                return super().get_db_prep_save(value, connection)

        class Note(SnowflakeModel):
            text = Asking(max_length=10)

            class Meta:
                app_label = "testapp"

            def __str__(self) -> str:
                return self.text

        class Stamping(models.DateTimeField):  # type: ignore[type-arg]
            def pre_save(self, model_instance, add):  # type: ignore[no-untyped-def]
                return super().pre_save(model_instance, add)  # its own: it might query

        class Stamped(SnowflakeModel):
            at = Stamping(auto_now=True)

            class Meta:
                app_label = "testapp"

            def __str__(self) -> str:
                return str(self.at)

        with model_table(Note):
            assert Plan(Customer, connection).prepares_offline
            assert not Plan(Note, connection).prepares_offline
            assert not Plan(Stamped, connection).prepares_offline
            notes = [Note(text=str(n)) for n in range(5)]
            assert bulk_load(Note, notes, batch_size=2) == 5


def _peak_bytes(rows: int, first: int) -> int:
    """Peak traced memory while ``rows`` instances stream from a generator into bulk_load.

    The keys are given (``first`` onwards): IDs made here would add what test mode keeps
    per millisecond used (docs/testing.rst), which grows with the time the load takes.
    """
    made = (Customer(id=first + n, name=f"customer {n}") for n in range(rows))
    tracemalloc.start()
    try:
        bulk_load(Customer, made, batch_size=500)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
def test_memory_stays_flat_whatever_the_number_of_rows() -> None:
    _peak_bytes(1_000, 1)  # the first load's one-time allocations (caches, prepared statements)
    small, large = _peak_bytes(5_000, 10_000), _peak_bytes(50_000, 100_000)
    # Ten times the rows, the same few batches in memory at once (measured: 1.1x to 1.25x
    # the small load's peak); a load that held the generator's instances peaks about ten
    # times higher.
    assert large < small * 2
