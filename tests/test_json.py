"""SnowflakeJSONEncoder and SnowflakeJSONRenderer: keys survive JSON.parse, in a real browser too.

A JavaScript number is exact only up to 2**53 - 1; JSON.parse rounds a larger integer without
a word. The browser test serves a page from Django's live server whose script parses the
JSON of each way a project writes keys (JsonResponse, serializers, DRF) and reports what the
browser read; it needs Debian's Chromium like tests/test_browser.py (skipped without it,
except under CI, where it fails).
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core import serializers
from django.core.serializers.json import DjangoJSONEncoder
from django.forms.models import model_to_dict
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.utils.html import json_script
from django.utils.translation import gettext_lazy
from rest_framework import serializers as drf_serializers
from rest_framework.decorators import api_view, renderer_classes
from rest_framework.request import Request
from rest_framework.response import Response

from django_snowflake.json import (
    SnowflakeJSONEncoder,
    SnowflakeJSONEncoderMixin,
    js_safe,
)
from tests.test_browser import browser, missing  # noqa: F401  (browser: a fixture)
from tests.testapp.models import Customer, Order, Writer

ROOT = Path(__file__).resolve().parent.parent
# The example: JSON.parse reads it as 250610186639638530. A key whose low bits are
# all zero (worker 0, sequence 0) happens to be a double, so the tests use odd keys.
KEY = 250610186639638529
# JavaScript's Number.MAX_SAFE_INTEGER, written out so the tests pin the package's constant.
MAX_SAFE_INTEGER = 9007199254740991


def dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, cls=SnowflakeJSONEncoder, **kwargs)


class Big(enum.IntEnum):
    KEY = KEY


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (MAX_SAFE_INTEGER, "9007199254740991"),
        (MAX_SAFE_INTEGER + 1, '"9007199254740992"'),
        (-MAX_SAFE_INTEGER, "-9007199254740991"),
        (-MAX_SAFE_INTEGER - 1, '"-9007199254740992"'),
        (0, "0"),
        (2**63 - 1, '"9223372036854775807"'),
        (True, "true"),
        (Big.KEY, f'"{KEY}"'),
        (1.5, "1.5"),
        (None, "null"),
        ((1, KEY), f'[1, "{KEY}"]'),
        (
            {"id": KEY, "n": 3, "nested": [{"fk": KEY}]},
            f'{{"id": "{KEY}", "n": 3, "nested": [{{"fk": "{KEY}"}}]}}',
        ),
        ({KEY: KEY}, f'{{"{KEY}": "{KEY}"}}'),
    ],
)
def test_integers_beyond_javascripts_safe_range_are_strings(value: Any, expected: str) -> None:
    assert dumps(value) == expected


def test_everything_else_is_written_as_djangos_encoder_writes_it() -> None:
    value = {
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC),
        "day": datetime.date(2026, 1, 2),
        "total": decimal.Decimal("83.00"),
        "ref": uuid.UUID(int=1),
        "took": datetime.timedelta(seconds=90),
        "label": gettext_lazy("Tags"),
        "small": 42,
    }
    for kwargs in [{}, {"indent": 2}, {"sort_keys": True, "separators": (",", ":")}]:
        assert dumps(value, **kwargs) == json.dumps(value, cls=DjangoJSONEncoder, **kwargs)


def test_a_circular_reference_is_still_reported() -> None:
    loop: list[Any] = [KEY]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)


def test_what_default_returns_is_made_safe_too() -> None:
    class SetEncoder(json.JSONEncoder):
        def default(self, o: Any) -> Any:
            if isinstance(o, set):
                return sorted(o)
            return super().default(o)

    class KeysEncoder(SnowflakeJSONEncoderMixin, SetEncoder):
        """The mixin in front of a project's own encoder."""

    assert json.dumps({"ids": {KEY, 1}}, cls=KeysEncoder) == f'{{"ids": [1, "{KEY}"]}}'


def test_js_safe_leaves_the_data_it_is_given_alone() -> None:
    data = {"ids": [KEY, 1], "pair": (KEY, 2)}
    assert js_safe(data) == {"ids": [str(KEY), 1], "pair": [str(KEY), 2]}
    assert data == {"ids": [KEY, 1], "pair": (KEY, 2)}


@pytest.fixture
def rows() -> tuple[Customer, Order, Writer]:
    """A SnowflakeModel key, a foreign key to it, and a SnowflakeAutoField key, all odd."""
    customer = Customer.objects.create(id=KEY, name="ada")
    order = Order.objects.create(id=KEY + 2, customer=customer, total=decimal.Decimal("83.00"))
    writer = Writer.objects.create(id=KEY + 4, name="grace")
    return customer, order, writer


@pytest.mark.django_db
def test_jsonresponse_of_values(rows: tuple[Customer, Order, Writer]) -> None:
    _, order, writer = rows
    response = JsonResponse(
        {"orders": list(Order.objects.values()), "writers": list(Writer.objects.values("id"))},
        encoder=SnowflakeJSONEncoder,
    )
    assert json.loads(response.content) == {
        "orders": [{"id": str(order.pk), "customer_id": str(KEY), "total": "83.00"}],
        "writers": [{"id": str(writer.pk)}],
    }


@pytest.mark.django_db
def test_model_to_dict_leaves_a_snowflakemodel_key_out_so_the_idiom_adds_it(
    rows: tuple[Customer, Order, Writer],
) -> None:
    _, order, writer = rows
    # model_to_dict() skips fields that are not editable, as SnowflakeModel's key is.
    assert "id" not in model_to_dict(order)
    assert model_to_dict(writer)["id"] == writer.pk
    response = JsonResponse({"id": order.pk, **model_to_dict(order)}, encoder=SnowflakeJSONEncoder)
    assert json.loads(response.content) == {
        "id": str(order.pk),
        "customer": str(KEY),
        "total": "83.00",
    }


@pytest.mark.django_db
def test_serializers_write_strings_and_read_them_back(rows: tuple[Customer, Order, Writer]) -> None:
    _, order, _ = rows
    data = serializers.serialize("json", Order.objects.all(), cls=SnowflakeJSONEncoder)
    assert json.loads(data) == [
        {
            "model": "testapp.order",
            "pk": str(order.pk),
            "fields": {"customer": str(KEY), "total": "83.00"},
        }
    ]
    Order.objects.all().delete()
    for restored in serializers.deserialize("json", data):
        restored.save()
    assert list(Order.objects.values_list("pk", "customer_id")) == [(order.pk, KEY)]


class PlainOrderSerializer(drf_serializers.ModelSerializer):  # type: ignore[type-arg]
    """What a project writes without this package's serializer."""

    class Meta:
        model = Order
        fields = ["id", "customer", "total"]


def test_a_plain_drf_serializer_writes_numbers_and_coerce_bigint_covers_only_the_key(
    settings: Any,
) -> None:
    order = Order(id=KEY + 2, customer_id=KEY, total=decimal.Decimal("83.00"))
    assert PlainOrderSerializer(order).data == {"id": KEY + 2, "customer": KEY, "total": "83.00"}
    # DRF's COERCE_BIGINT_TO_STRING (3.18 here) reaches BigIntegerField serializer fields, not the
    # PrimaryKeyRelatedField of a foreign key: it is not enough alone.
    settings.REST_FRAMEWORK = {"COERCE_BIGINT_TO_STRING": True}
    assert PlainOrderSerializer(order).data == {
        "id": str(KEY + 2),
        "customer": KEY,
        "total": "83.00",
    }


DRF_SCRIPT = """
import json, decimal
from django.conf import settings
import tests.settings as base

settings.configure(
    **{k: v for k, v in vars(base).items() if k.isupper()},
    REST_FRAMEWORK={
        "DEFAULT_RENDERER_CLASSES": [
            "django_snowflake.json.SnowflakeJSONRenderer",
            "rest_framework.renderers.BrowsableAPIRenderer",
        ],
    },
)
import django
django.setup()
from rest_framework import serializers, viewsets
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from tests.testapp.models import Order

class OrderSerializer(serializers.ModelSerializer):
    class Meta:
        model = Order
        fields = ["id", "customer", "total"]

class Orders(viewsets.ViewSet):
    def list(self, request):
        order = Order(id=KEY + 2, customer_id=KEY, total=decimal.Decimal("83.00"))
        return Response([{**OrderSerializer(order).data, "items": [KEY + 4, 7]}])

response = Orders.as_view({"get": "list"})(APIRequestFactory().get("/"))
response.render()
print(json.dumps([response["Content-Type"], response.content.decode()]))
"""


def test_drf_one_line_setting_renders_every_key_beyond_2_53_as_a_string() -> None:
    # APIView reads DEFAULT_RENDERER_CLASSES when rest_framework.views is imported, so the
    # setting is tried in a process of its own, as a project would have it.
    script = DRF_SCRIPT.replace("KEY", str(KEY))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )
    content_type, content = json.loads(result.stdout)
    assert content_type == "application/json"
    assert json.loads(content) == [
        {"id": str(KEY + 2), "customer": str(KEY), "total": "83.00", "items": [str(KEY + 4), 7]}
    ]


# --- In a real browser ----------------------------------------------------------------------


def _keys_page(request: HttpRequest) -> HttpResponse:
    # The expected keys travel as strings (json_script writes them as the encoder would not).
    expected = [str(pk) for pk in Order.objects.order_by("pk").values_list("pk", flat=True)]
    return HttpResponse(
        f"""<!doctype html><title>keys</title>{json_script(expected, "expected")}
<script>
const expected = JSON.parse(document.getElementById("expected").textContent);
async function read(url, pick) {{
  const rows = JSON.parse(await (await fetch(url)).text());
  const keys = pick(rows).map(String);
  return {{keys, exact: keys.length === expected.length && keys.every((k, i) => k === expected[i])}};
}}
const values = rows => rows.map(row => row.id);
window.report = Promise.all([
  read("/json/plain/", values),
  read("/json/snowflake/", values),
  read("/json/serialize/", rows => rows.map(row => row.pk)),
  read("/json/drf/", values),
]).then(([plain, snowflake, serialize, drf]) => ({{plain, snowflake, serialize, drf}}));
</script>"""
    )


def _values(encoder: type[json.JSONEncoder]) -> Any:
    def view(request: HttpRequest) -> JsonResponse:
        return JsonResponse(
            list(Order.objects.order_by("pk").values()), encoder=encoder, safe=False
        )

    return view


def _serialize(request: HttpRequest) -> HttpResponse:
    data = serializers.serialize("json", Order.objects.order_by("pk"), cls=SnowflakeJSONEncoder)
    return HttpResponse(data, content_type="application/json")


def _drf_view() -> Any:
    from django_snowflake.json import SnowflakeJSONRenderer

    @api_view(["GET"])
    @renderer_classes([SnowflakeJSONRenderer])
    def view(request: Request) -> Response:
        return Response(PlainOrderSerializer(Order.objects.order_by("pk"), many=True).data)

    return view


urlpatterns = [
    path("keys/", _keys_page),
    path("json/plain/", _values(DjangoJSONEncoder)),
    path("json/snowflake/", _values(SnowflakeJSONEncoder)),
    path("json/serialize/", _serialize),
    path("json/drf/", _drf_view()),
]


@pytest.fixture
def orders(transactional_db: None) -> tuple[list[int], list[int]]:
    """Orders keyed by the generator, and two with odd keys that no double holds."""
    customer = Customer.objects.create(id=KEY, name="ada")
    made = [Order.objects.create(customer=customer).pk for _ in range(3)]
    odd = [Order.objects.create(id=KEY + n, customer=customer).pk for n in (2, 4)]
    return made, odd


@pytest.mark.slow
@pytest.mark.skipif(bool(missing) and not os.environ.get("CI"), reason=str(missing))
@pytest.mark.urls("tests.test_json")
def test_keys_survive_json_parse_in_a_browser(
    orders: tuple[list[int], list[int]],
    live_server: Any,
    browser: Any,  # noqa: F811  (the fixture of tests/test_browser.py: Chromium, or fail under CI)
) -> None:
    # The rows come first: Playwright's sync API runs an event loop in this thread, where
    # Django refuses queries.
    made, odd = orders
    expected = [str(pk) for pk in sorted(made + odd)]
    page = browser.new_page()
    page.goto(f"{live_server.url}/keys/")
    report = page.evaluate("window.report")
    for name in ("snowflake", "serialize", "drf"):
        assert report[name] == {"keys": expected, "exact": True}, name
    # The control: Django's own encoder writes numbers, and the browser rounds the odd keys.
    assert report["plain"]["exact"] is False
    plain = dict(zip(expected, report["plain"]["keys"], strict=True))
    assert all(plain[str(pk)] != str(pk) for pk in odd)
