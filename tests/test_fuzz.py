"""Hostile input at every entry point that takes an ID or a setting: clear errors only.

Each property runs ``FUZZ_EXAMPLES`` cases (default 1000; ``FUZZ_EXAMPLES=10000 python -m
pytest tests/test_fuzz.py`` for a longer hunt). An entry point may answer with its own error
(``InvalidSnowflake``, a 404, ``ValidationError``, ``CommandError``, check messages), never
with another exception, a 500 or a traceback.
"""

from __future__ import annotations

import os
import string
from datetime import UTC, datetime, timedelta, timezone
from io import StringIO
from typing import Any
from urllib.parse import quote

import pytest
from django.core.checks import CheckMessage
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from rest_framework import serializers

import django_snowflake
from django_snowflake import conf, runtime
from django_snowflake.checks import check_settings
from django_snowflake.exceptions import InvalidSnowflake
from django_snowflake.forms import SnowflakeFormField
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.rest_framework import SnowflakeField

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1000"))
MAX_ID = 2**63 - 1

fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Near-misses of IDs: digits of every length, signs, spaces, other scripts' digits, floats.
id_like = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.integers(min_value=MAX_ID - 1000, max_value=MAX_ID + 1000),
    st.from_regex(r"\A[ +\-]?[0-9]{0,25}[ .e]?[0-9]{0,3}\Z"),
    # ASCII digits, Arabic-Indic and fullwidth digits (str.isdigit() is true for them), junk.
    st.text(alphabet="0123456789\u0660\u0661\u0665\uff10\uff11\uff19 -+_.,e\x00\n", max_size=25),
)
anything = st.one_of(
    id_like,
    st.text(max_size=40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.binary(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.decimals(allow_nan=True),
)


@fuzz
@given(value=anything)
def test_decode_returns_parts_or_raises_invalid_snowflake(value: Any) -> None:
    try:
        parts = django_snowflake.decode(value)
    except InvalidSnowflake as exc:
        assert isinstance(exc, ValueError) and str(exc)
        return
    assert parts.id == int(value) and 0 <= parts.id <= MAX_ID
    assert parts.as_dict()["id"] == parts.id


@pytest.mark.django_db
@fuzz
@given(value=st.one_of(id_like.map(str), st.text(max_size=40)))
def test_the_url_converter_answers_404_never_500(client: Client, value: str) -> None:
    # The test client re-raises what a view raises: an exception here would be a 500.
    for prefix in ("/orders/", "/api/orders/"):
        response = client.get(f"{prefix}{quote(value, safe='')}/")
        assert response.status_code == 404, (prefix, value, response.status_code)


@fuzz
@given(value=anything, required=st.booleans())
def test_the_form_field_cleans_or_says_invalid(value: Any, required: bool) -> None:
    field = SnowflakeFormField(required=required)
    try:
        cleaned = field.clean(value)
    except ValidationError as exc:
        assert exc.code in {"invalid", "max_value", "required"}, exc.code
        return
    assert cleaned is None or (isinstance(cleaned, int) and 0 <= cleaned <= MAX_ID)


@fuzz
@given(value=anything)
def test_the_drf_field_validates_or_says_invalid(value: Any) -> None:
    field = SnowflakeField()
    try:
        cleaned = field.run_validation(value)
    except serializers.ValidationError as exc:
        codes = exc.get_codes()
        assert codes in (["invalid"], ["max_value"], ["null"], ["required"]), codes
        return
    assert isinstance(cleaned, int) and 0 <= cleaned <= MAX_ID
    assert field.to_representation(cleaned) == str(cleaned)


@fuzz
@given(
    ids=st.lists(st.one_of(id_like.map(str), st.text(max_size=20)), min_size=1, max_size=4),
    as_json=st.booleans(),
)
def test_decode_snowflake_succeeds_or_raises_command_error(ids: list[str], as_json: bool) -> None:
    options = ["--json"] if as_json else []
    out = StringIO()
    try:
        call_command("decode_snowflake", *ids, *options, stdout=out, stderr=StringIO())
    except CommandError as exc:
        assert str(exc)
        return
    assert out.getvalue()


# Settings: known keys with values of every type, and unknown keys.
setting_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-2, max_value=70),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "twitter",
            "sonyflake",
            "baidu",
            "js_safe",
            "raise",
            "wait",
            "borrow",
            "ring",
            "clock_sequence",
            "database",
            "static",
            "hostname",
            "default",
            "web",
            "django_snowflake.allocators.base.BaseAllocator",
            "django_snowflake.allocators.static.StaticAllocator",
            "os.path",
            "2025-01-01T00:00:00Z",
            "2025-01-01",
            "1999-12-31T23:00:00+01:00",
            "2999-01-01T00:00:00Z",
        ]
    ),
    st.datetimes(
        min_value=datetime(1900, 1, 1),
        max_value=datetime(2200, 1, 1),
        timezones=st.sampled_from([None, UTC, timezone(timedelta(hours=-5))]),
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
random_settings = st.dictionaries(
    st.one_of(
        st.sampled_from(list(conf.DEFAULTS)),
        st.text(alphabet=string.ascii_uppercase + "_", min_size=1, max_size=12),
        st.integers(),
    ),
    setting_values,
    max_size=6,
)
# Mostly plausible values, so that many cases pass the checks and reach build().
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "LAYOUT": st.sampled_from(["twitter", "sonyflake", "baidu", "js_safe"]),
    "TIME_BITS": st.integers(0, 50),
    "DATACENTER_BITS": st.integers(0, 12),
    "CLOCK_SEQUENCE_BITS": st.integers(0, 6),
    "WORKER_BITS": st.integers(0, 24),
    "SEQUENCE_BITS": st.integers(0, 24),
    "TIME_UNIT_MS": st.sampled_from([1, 2, 10, 1000, 0]),
    "EPOCH": st.one_of(
        st.sampled_from(["2025-01-01T00:00:00Z", "2010-11-04T01:42:54.657Z", "2020-01-01"]),
        st.integers(0, 1_750_000_000_000),
        st.datetimes(datetime(1970, 1, 2), datetime(2025, 1, 1), timezones=st.just(UTC)),
    ),
    "CLOCK_ROLLBACK": st.sampled_from(["raise", "wait", "borrow", "clock_sequence", "ring"]),
    "MAX_ROLLBACK_MS": st.integers(0, 70_000),
    "WORKER_ALLOCATOR": st.sampled_from(["database", "static", "static", "hostname"]),
    "WORKER_ID": st.integers(0, 2**20),
    "DATACENTER_ID": st.integers(0, 40),
    "DATABASE": st.just("default"),
    "LEASE_SECONDS": st.integers(1, 600),
    "PROCESS_LABEL": st.text(max_size=110),
    "CLAIM_ON_READY": st.booleans(),
}


@st.composite
def plausible_settings(draw: st.DrawFn) -> dict[str, Any]:
    """A few keys with plausible values, now and then one with a value of any type."""
    keys = draw(st.lists(st.sampled_from(list(PLAUSIBLE)), max_size=4, unique=True))
    value = {key: draw(PLAUSIBLE[key]) for key in keys}
    if keys and draw(st.booleans()):
        value[draw(st.sampled_from(keys))] = draw(setting_values)
    return value


snowflake_settings = st.one_of(random_settings, plausible_settings())


@fuzz
@given(value=snowflake_settings)
def test_settings_are_judged_by_the_checks_and_built_when_valid(value: dict[Any, Any]) -> None:
    with override_settings(SNOWFLAKE=value):
        messages = check_settings()
        assert all(isinstance(m, CheckMessage) and m.id and m.hint for m in messages)
        if any(m.is_serious() for m in messages):
            event("rejected by the checks")
            return
        event("valid: built")
        generator = runtime.build()
        assert isinstance(generator, SnowflakeGenerator)
        assert generator.layout == conf.get_layout()
        if conf.get_settings()["WORKER_ALLOCATOR"] == "static":
            # No database needed: the generator must issue an ID its layout decodes.
            value = generator.next_id()
            assert django_snowflake.decode(value).id == value


@fuzz
@given(value=snowflake_settings)
def test_settings_through_manage_py_check(value: dict[Any, Any]) -> None:
    # What a user runs: the command either passes or stops with the checks' own report.
    with override_settings(SNOWFLAKE=value):
        try:
            call_command("check", "django_snowflake", stdout=StringIO(), stderr=StringIO())
        except SystemCheckError as exc:
            report = str(exc)
            assert "django_snowflake.E0" in report and "HINT:" in report, report
            event("stopped by the checks")
        else:
            event("passed")
