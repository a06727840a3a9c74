from __future__ import annotations

from urllib.parse import quote

import pytest
from django import forms
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import NoReverseMatch, resolve, reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_snowflake.converters import SnowflakeConverter
from django_snowflake.forms import SnowflakeFormField
from tests.factories import OrderFactory
from tests.testapp.models import Ticket

MAX_ID = 2**63 - 1
fuzz = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
garbage = st.one_of(
    st.text(),
    st.from_regex(r"\A-?[0-9]{1,25}\Z"),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


def test_the_app_registers_the_converter() -> None:
    match = resolve(f"/orders/{MAX_ID}/")
    assert match.kwargs == {"pk": MAX_ID}
    assert reverse("order-detail", args=[42]) == "/orders/42/"
    assert reverse("order-detail", args=["42"]) == "/orders/42/"


@pytest.mark.parametrize("value", [-1, 2**63, "abc", 1.5, True])
def test_reversing_a_bad_id_finds_no_url(value: object) -> None:
    with pytest.raises(NoReverseMatch):
        reverse("order-detail", args=[value])


@pytest.mark.parametrize("value", [str(2**63), "9" * 19])
def test_out_of_range_digits_are_a_value_error(value: str) -> None:
    with pytest.raises(ValueError):
        SnowflakeConverter().to_python(value)


@pytest.mark.django_db
def test_plain_view_behind_the_converter(client: Client) -> None:
    order = OrderFactory()
    response = client.get(f"/orders/{order.pk}/")
    assert response.status_code == 200
    assert response.text == f"{order.pk} {order.created_at.isoformat()}"
    for path in [f"/orders/{order.pk + 1}/", f"/orders/{2**63}/", "/orders/1" + "0" * 19 + "/"]:
        assert client.get(path).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("prefix", ["0", "00", "0000"])
def test_leading_zeros_are_not_a_second_url(client: Client, prefix: str) -> None:
    order = OrderFactory()
    assert client.get(f"/orders/{order.pk}/").status_code == 200
    assert client.get(f"/orders/{prefix}{order.pk}/").status_code == 404
    assert client.get("/orders/0/").status_code == 404  # 0 itself is canonical, just unknown
    assert resolve("/orders/0/").kwargs == {"pk": 0}
    assert reverse("order-detail", args=[f"0{order.pk}"]) == f"/orders/{order.pk}/"


@pytest.mark.parametrize("value", ["", "01", "00", "1a", " 1", "1" * 20, "-1", 1])
def test_to_python_checks_the_pattern_itself(value: object) -> None:
    with pytest.raises(ValueError):
        SnowflakeConverter().to_python(value)  # type: ignore[arg-type]


@pytest.mark.django_db
@fuzz
@given(value=garbage)
def test_garbage_in_the_url_is_a_404_never_a_500(client: Client, value: str) -> None:
    # The test client re-raises any exception a view raises, so a 500 fails the test.
    response = client.get(f"/orders/{quote(value, safe='')}/")
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("value", "expected"),
    [("123", 123), (123, 123), (" 42 ", 42), ("0", 0), (str(MAX_ID), MAX_ID), ("", None)],
)
def test_form_field_cleans_digits_to_int(value: object, expected: int | None) -> None:
    assert SnowflakeFormField(required=False).clean(value) == expected


@pytest.mark.parametrize("value", ["abc", "-1", "1.0", 1.0, True, -5, "١٢٣", "12 3"])
def test_form_field_rejects_anything_else(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        SnowflakeFormField().clean(value)
    assert info.value.code == "invalid"
    assert info.value.messages == ["Enter a valid ID: a whole number of up to 19 digits."]


@pytest.mark.parametrize("value", [str(2**63), 2**63, "1" * 20, "9" * 19, " 9" + "0" * 30])
def test_form_field_says_too_large_and_names_the_largest(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        SnowflakeFormField().clean(value)
    assert info.value.code == "max_value"
    assert info.value.messages == [f"This ID is too large (the largest ID is {MAX_ID})."]


def test_form_field_is_a_text_input() -> None:
    html = str(SnowflakeFormField().widget.render("id", 2**62))
    assert 'type="text"' in html and 'inputmode="numeric"' in html
    assert f'value="{2**62}"' in html


@fuzz
@given(value=garbage)
def test_form_field_never_raises_anything_but_validation_error(value: str) -> None:
    try:
        cleaned = SnowflakeFormField().clean(value)
    except ValidationError:
        return
    assert isinstance(cleaned, int) and 0 <= cleaned <= MAX_ID
    assert cleaned == int(value)


class TicketForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Ticket
        fields = ["code", "external_ref"]


@pytest.mark.django_db
def test_model_form_with_a_snowflake_column() -> None:
    form = TicketForm()
    assert isinstance(form.fields["code"], SnowflakeFormField)
    assert isinstance(form.fields["code"].widget, forms.TextInput)
    form = TicketForm(data={"code": "12345678901234567", "external_ref": ""})
    assert form.is_valid(), form.errors
    ticket = form.save()
    ticket.refresh_from_db()
    assert (ticket.code, ticket.external_ref) == (12345678901234567, None)
    form = TicketForm(data={"code": "1e9", "external_ref": "x"})
    assert not form.is_valid()
    assert set(form.errors) == {"code", "external_ref"}
