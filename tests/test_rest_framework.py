from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers
from rest_framework.test import APIClient

from django_snowflake.rest_framework import SnowflakeField
from tests.factories import (
    CustomerFactory,
    EventFactory,
    OrderFactory,
    OrderItemFactory,
    TagFactory,
)
from tests.testapp.models import Order, Ticket
from tests.testapp.serializers import EventSerializer, OrderSerializer, TicketSerializer

MAX_ID = 2**63 - 1
BAD_VALUES: list[Any] = [
    "abc",
    "",
    " 1",
    "1.0",
    1.5,
    True,
    None,
    -1,
    "-1",
    2**63,
    str(2**63),
    "1" * 20,
    [],
    {},
]


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.mark.parametrize(("value", "expected"), [("123", 123), (123, 123), (str(MAX_ID), MAX_ID)])
def test_field_reads_strings_and_integers(value: object, expected: int) -> None:
    assert SnowflakeField().run_validation(value) == expected


TOO_LARGE: list[Any] = [2**63, str(2**63), "1" * 20, "9" * 19, "9" * 400]


@pytest.mark.parametrize(
    "value", [v for v in BAD_VALUES if v is not None and v != "" and v not in TOO_LARGE]
)
def test_field_rejects_everything_else(value: object) -> None:
    with pytest.raises(serializers.ValidationError) as info:
        SnowflakeField().run_validation(value)
    assert info.value.get_codes() == ["invalid"]
    assert info.value.detail == ["A valid ID is a string of up to 19 digits."]


@pytest.mark.parametrize("value", TOO_LARGE)
def test_too_large_ids_say_so_and_name_the_largest(value: object) -> None:
    with pytest.raises(serializers.ValidationError) as info:
        SnowflakeField().run_validation(value)
    assert info.value.get_codes() == ["max_value"]
    assert info.value.detail == [f"This ID is too large (the largest ID is {MAX_ID})."]


@pytest.mark.django_db
def test_too_large_id_over_http(api: APIClient) -> None:
    response = api.post("/api/tickets/", {"code": "9999999999999999999"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"code": [f"This ID is too large (the largest ID is {MAX_ID})."]}


def test_field_writes_strings() -> None:
    assert SnowflakeField().to_representation(MAX_ID) == str(MAX_ID)


def test_model_serializer_maps_snowflake_fields_and_relations() -> None:
    fields = OrderSerializer().fields
    assert isinstance(fields["id"], SnowflakeField) and fields["id"].read_only
    assert isinstance(fields["customer"].pk_field, SnowflakeField)
    assert isinstance(fields["items"].child_relation.pk_field, SnowflakeField)
    event_fields = EventSerializer().fields
    assert isinstance(event_fields["id"], SnowflakeField) and event_fields["id"].read_only
    assert isinstance(event_fields["tags"].child_relation.pk_field, SnowflakeField)
    ticket_fields = TicketSerializer().fields
    assert isinstance(ticket_fields["id"], serializers.IntegerField)  # an ordinary key
    assert isinstance(ticket_fields["code"], SnowflakeField) and not ticket_fields["code"].required
    assert ticket_fields["external_ref"].allow_null


@pytest.mark.django_db
def test_ids_travel_as_strings(api: APIClient) -> None:
    order = OrderFactory()
    item = OrderItemFactory(order=order)
    response = api.get(f"/api/orders/{order.pk}/")
    assert response.status_code == 200
    assert json.loads(response.content) == {
        "id": str(order.pk),
        "customer": str(order.customer_id),
        "total": f"{order.total:.2f}",
        "items": [str(item.pk)],
    }


@pytest.mark.django_db
@pytest.mark.parametrize("as_string", [True, False])
def test_create_with_a_string_or_an_integer_id(api: APIClient, as_string: bool) -> None:
    customer = CustomerFactory()
    key = str(customer.pk) if as_string else customer.pk
    response = api.post("/api/orders/", {"customer": key, "total": "9.50"}, format="json")
    assert response.status_code == 201, response.content
    order = Order.objects.get(pk=int(response.json()["id"]))
    assert order.customer == customer


@pytest.mark.django_db
def test_many_to_many_and_plain_columns(api: APIClient) -> None:
    tags = TagFactory.create_batch(2)
    response = api.post(
        "/api/events/", {"name": "launch", "tags": [str(tags[0].pk), tags[1].pk]}, format="json"
    )
    assert response.status_code == 201, response.content
    assert sorted(response.json()["tags"]) == sorted(str(tag.pk) for tag in tags)
    event = EventFactory()
    response = api.post(
        "/api/tickets/", {"code": "1234567890123", "event": str(event.pk)}, format="json"
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["code"], data["external_ref"], data["event"]) == (
        "1234567890123",
        None,
        str(event.pk),
    )
    assert Ticket.objects.get(pk=data["id"]).code == 1234567890123
    # The column's default gives an ID when the client sends none.
    response = api.post("/api/tickets/", {}, format="json")
    assert response.status_code == 201 and int(response.json()["code"]) > 0


@pytest.mark.django_db
@pytest.mark.parametrize("value", BAD_VALUES)
def test_malformed_related_ids_are_validation_errors(api: APIClient, value: object) -> None:
    response = api.post("/api/orders/", {"customer": value, "total": "1"}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"customer"}


@pytest.mark.django_db
def test_missing_related_id_is_a_validation_error(api: APIClient) -> None:
    response = api.post("/api/orders/", {"customer": "12345", "total": "1"}, format="json")
    assert response.status_code == 400
    assert response.json()["customer"][0].startswith("Invalid pk")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["123", str(2**63), "1" * 25, "abc", "-5", "%20"])
def test_malformed_or_missing_ids_in_api_urls_are_404s(api: APIClient, path: str) -> None:
    assert api.get(f"/api/orders/{path}/").status_code == 404


@pytest.mark.django_db
@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "1000")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    value=st.one_of(
        st.text(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )
)
def test_fuzzed_related_ids_never_cause_a_500(api: APIClient, value: object) -> None:
    response = api.post("/api/tickets/", {"code": value, "event": value}, format="json")
    assert response.status_code in {201, 400}
