"""bulk_load of PostgreSQL's own types (django.contrib.postgres): arrays, ranges, hstore.

Twin tables again, as in tests/test_bulk_load.py: the same rows through bulk_load and
bulk_create must read back identical, on each COPY path. tests.pg_app is installed for these
tests alone (it needs django.contrib.postgres and the hstore extension its migration makes).
"""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
import zoneinfo
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, models
from django.test import override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_snowflake import generate
from django_snowflake.bulk import bulk_load
from django_snowflake.bulk import postgresql as bulk_postgresql
from django_snowflake.bulk.plan import Plan
from django_snowflake.bulk.postgresql import PostgreSQLLoader

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="django.contrib.postgres fields"
)

PATHS = ["binary", "binary_rows", "text"]


@pytest.fixture
def pg_app(transactional_db: None) -> Iterator[tuple[type[models.Model], type[models.Model]]]:
    """tests.pg_app installed and migrated: (LoadedPg, CreatedPg); gone after the test."""
    apps = [*settings.INSTALLED_APPS, "django.contrib.postgres", "tests.pg_app"]
    with override_settings(INSTALLED_APPS=apps):
        call_command("migrate", "pg_app", verbosity=0)
        from tests.pg_app.models import CreatedPg, LoadedPg

        try:
            yield LoadedPg, CreatedPg
        finally:
            call_command("migrate", "pg_app", "zero", verbosity=0)
    # The connection keeps the hstore adapters of an extension now dropped: start afresh.
    connection.close()


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    if name == "text":
        monkeypatch.setattr(PostgreSQLLoader, "_binary_types", lambda self: None)
    if name == "binary_rows":  # psycopg's write_row(), where its row formatter is not found
        monkeypatch.setattr(bulk_postgresql, "_format_row_binary", None)
    return name


def uses_binary_copy(model: type[models.Model]) -> bool:
    return PostgreSQLLoader(Plan(model, connection)).types is not None


def read(model: type[models.Model]) -> list[dict[str, Any]]:
    return list(model.objects.order_by("pk").values())


def load_twins(twins: tuple[type[models.Model], type[models.Model]], specs: list[dict]) -> None:
    loaded_model, created_model = twins
    loaded_model.objects.all().delete()
    created_model.objects.all().delete()
    loaded, created = [], []
    for spec in specs:
        pk = generate()
        loaded.append(loaded_model(id=pk, **spec))
        created.append(created_model(id=pk, **spec))
    assert bulk_load(loaded_model, iter(loaded), batch_size=3) == len(loaded)
    created_model.objects.bulk_create(created)
    assert read(loaded_model) == read(created_model)
    assert len(read(loaded_model)) == len(specs)


PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NASTY = ['a"b', "c,d", "e\\f", "{g}", "NULL", "null", "", " ", "h i", "tab\there", "nl\nx"]
NASTY += ["été", "日本", "🎉", "'quote'", "=>", '"=>"', "a=>b, c=>d"]


def edge_cases() -> list[dict[str, Any]]:
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange, NumericRange

    moment = datetime.datetime(2024, 3, 31, 1, 30, tzinfo=datetime.UTC)
    return [
        {"required_span": NumericRange(1, 10)},  # defaults everywhere else
        {
            "numbers": [],
            "maybe_numbers": [],
            "words": [],
            "maybe_words": [],
            "grid": [],
            "required_span": NumericRange(empty=True),
            "span": NumericRange(5, 5),  # empty too: [5,5)
            "pairs": {},
            "maybe_pairs": {},
        },
        {
            "numbers": [None, 1, None, -(2**31), 2**31 - 1],
            "maybe_numbers": [2**63 - 1, -(2**63)],
            "words": [None, *NASTY],
            "maybe_words": [None, "", "NULL"],
            "grid": [[1, 2], [3, 4]],
            "required_span": NumericRange(None, None),
            "span": NumericRange(None, 0),
            "period": DateTimeTZRange(moment, None, "[]"),
            "pairs": {"k": None, "": "", 'q"uote': 'v"al', "back\\slash": "\\", "a,b": "c=>d"},
            "maybe_pairs": {word: word for word in NASTY},
        },
        {
            "required_span": NumericRange(-5, None, "(]"),
            "span": NumericRange(0, 3, "[]"),  # canonical form: [0,4)
            "period": DateTimeTZRange(
                None, datetime.datetime(2024, 10, 27, 2, 30, tzinfo=PARIS), "(]"
            ),
            "maybe_pairs": {"only": None},
        },
        {
            "required_span": (1, 2),  # a tuple, as the field takes
            "period": DateTimeTZRange(moment, moment + datetime.timedelta(microseconds=1)),
            "words": ["x" * 10_000, "\x7f", "\u2028", "\\N", "\\."],
            "maybe_words": ["\\", '"', ","],
        },
        {
            "required_span": NumericRange(0, 1),
            "days": [datetime.date(1, 1, 1), None, datetime.date(9999, 12, 31)],
            "amounts": [decimal.Decimal("-999999999.999"), None, decimal.Decimal("0.001"), 7],
            "tokens": [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)],
            "ratios": [0.0, -0.0, 1e308, -math.inf, math.inf, 5e-324],
            "flags": [True, None, False],
            "moments": [moment, datetime.datetime(2024, 10, 27, 2, 30, tzinfo=PARIS)],
        },
        {
            "required_span": NumericRange(0, 1),
            "days": [],
            "amounts": [],
            "tokens": [],
            "ratios": [],
            "flags": [],
            "moments": [],
        },
        {  # a naive bound: Django sends it as it is, read in the connection's time zone
            "required_span": NumericRange(0, 1),
            "period": DateTimeTZRange(datetime.datetime(2024, 1, 1, 12), None),
        },
    ]


def test_edge_cases_read_back_identical(pg_app: Any, path: str) -> None:
    assert uses_binary_copy(pg_app[0]) == path.startswith("binary")
    load_twins(pg_app, edge_cases())


def test_without_time_zone_support(pg_app: Any, path: str) -> None:
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange, NumericRange

    naive = datetime.datetime(2024, 6, 1, 12, 0)
    with override_settings(USE_TZ=False):
        # Binary COPY would read a naive bound as UTC, text as the connection's time zone.
        assert not uses_binary_copy(pg_app[0])
        load_twins(
            pg_app,
            [
                {"required_span": NumericRange(0, 1), "period": DateTimeTZRange(naive, None)},
                {"required_span": NumericRange(0, 1), "period": DateTimeTZRange(None, naive)},
                {"required_span": NumericRange(0, 1), "moments": [naive, None]},
            ],
        )
        loader = PostgreSQLLoader(Plan(pg_app[0], connection))
        assert loader._binary_type(pg_app[0]._meta.get_field("moments")) is None
        assert loader._binary_type(pg_app[0]._meta.get_field("days")) == "date[]"


def test_arrays_of_json_take_text_copy(pg_app: Any, path: str) -> None:
    from tests.pg_app.models import CreatedJsonArray, LoadedJsonArray

    assert not uses_binary_copy(LoadedJsonArray)
    documents = [{"a": [1, "2", None]}, None, "3", "", [], {"t\tab": "\n\\x \\u0041"}, 1.5, True]
    load_twins((LoadedJsonArray, CreatedJsonArray), [{"documents": documents}, {}])


text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
moments = st.datetimes(
    min_value=datetime.datetime(1000, 1, 2),
    max_value=datetime.datetime(9999, 12, 30),
    timezones=st.sampled_from([datetime.UTC, PARIS]),
)
bounds = st.sampled_from(["[)", "(]", "[]", "()"])
amounts = st.decimals(
    min_value=-(10**9) + 1, max_value=10**9 - 1, places=3, allow_nan=False, allow_infinity=False
)


@st.composite
def int_ranges(draw: st.DrawFn) -> Any:
    from django.db.backends.postgresql.psycopg_any import NumericRange

    if draw(st.booleans()) and draw(st.booleans()):
        return NumericRange(empty=True)
    ends = sorted(draw(st.lists(st.integers(-(2**31) + 2, 2**31 - 3), min_size=2, max_size=2)))
    lower = draw(st.none() | st.just(ends[0]))
    upper = draw(st.none() | st.just(ends[1]))
    return NumericRange(lower, upper, draw(bounds))


@st.composite
def time_ranges(draw: st.DrawFn) -> Any:
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

    ends = sorted(draw(st.lists(moments, min_size=2, max_size=2)))
    lower = draw(st.none() | st.just(ends[0]))
    upper = draw(st.none() | st.just(ends[1]))
    return DateTimeTZRange(lower, upper, draw(bounds))


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    width = draw(st.integers(0, 3))
    return {
        "numbers": draw(st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=5)),
        "maybe_numbers": draw(st.none() | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4)),
        "words": draw(st.lists(st.none() | text | st.sampled_from(NASTY), max_size=5)),
        "maybe_words": draw(
            st.none() | st.lists(st.none() | text.filter(lambda s: len(s) <= 20), max_size=4)
        ),
        "grid": draw(
            st.none()
            | st.lists(
                st.lists(st.integers(-100, 100), min_size=width, max_size=width),
                min_size=1,
                max_size=3,
            )
            if width
            else st.just([])
        ),
        "span": draw(st.none() | int_ranges()),
        "required_span": draw(int_ranges()),
        "period": draw(st.none() | time_ranges()),
        "pairs": draw(st.dictionaries(text, st.none() | text, max_size=4)),
        "maybe_pairs": draw(st.none() | st.dictionaries(text, st.none() | text, max_size=3)),
        "days": draw(st.none() | st.lists(st.none() | st.dates(), max_size=3)),
        "amounts": draw(st.none() | st.lists(st.none() | amounts, max_size=3)),
        "tokens": draw(st.none() | st.lists(st.uuids(), max_size=3)),
        "ratios": draw(st.none() | st.lists(st.floats(allow_nan=False), max_size=3)),
        "flags": draw(st.none() | st.lists(st.none() | st.booleans(), max_size=3)),
        "moments": draw(st.none() | st.lists(moments, max_size=3)),
    }


@hypothesis_settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(specs=st.lists(rows(), max_size=8))
def test_twins_read_back_identical(pg_app: Any, path: str, specs: list[dict[str, Any]]) -> None:
    load_twins(pg_app, specs)
