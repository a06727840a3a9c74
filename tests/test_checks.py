"""The settings checks: one test per ID, and every ID unique in the code and documented."""

from __future__ import annotations

import ast
import re
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.checks import WARNING, run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from django_snowflake import runtime
from django_snowflake.allocators.base import BaseAllocator
from django_snowflake.checks import DEPLOYMENT, check_settings

ROOT = Path(__file__).resolve().parent.parent

# Valid settings that need no database: each test changes one thing, so that it sees
# exactly the check it is about.
STATIC = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 1}


class CustomAllocator(BaseAllocator):
    """A dotted-path allocator, for E030."""


def ids(snowflake: Any) -> list[str]:
    """The check IDs ``check_settings`` returns under ``SNOWFLAKE = snowflake``."""
    with override_settings(SNOWFLAKE=snowflake):
        messages = check_settings()
    for message in messages:
        assert message.hint, message.id
        assert message.obj == "settings.SNOWFLAKE"
    return [message.id or "" for message in messages]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The environment of whoever runs the tests must not feed the static allocator.
    monkeypatch.delenv("SNOWFLAKE_WORKER_ID", raising=False)


def test_defaults() -> None:
    # The default allocator is "database": this passes once its module is importable.
    assert ids({}) == []
    assert ids(None) == []


def test_valid_static_settings() -> None:
    assert ids(STATIC) == []


def test_E001_not_a_dict() -> None:
    assert ids(["LAYOUT", "twitter"]) == ["django_snowflake.E001"]


@pytest.mark.parametrize("extra", [{"LAYOUTS": "twitter"}, {1: 2, "Worker_ID": 3}])
def test_E002_unknown_keys(extra: dict[Any, Any]) -> None:
    assert ids({**STATIC, **extra}) == ["django_snowflake.E002"]


@pytest.mark.parametrize("preset", ["snowflake", "", None, 41])
def test_E003_unknown_preset(preset: object) -> None:
    assert ids({**STATIC, "LAYOUT": preset}) == ["django_snowflake.E003"]


@pytest.mark.parametrize(
    "key", ["TIME_BITS", "DATACENTER_BITS", "CLOCK_SEQUENCE_BITS", "WORKER_BITS", "SEQUENCE_BITS"]
)
@pytest.mark.parametrize("value", [-1, "10", 1.5, True])
def test_E004_bits_not_a_non_negative_integer(key: str, value: object) -> None:
    assert ids({**STATIC, key: value}) == ["django_snowflake.E004"]


def test_E005_too_many_bits() -> None:
    assert ids({**STATIC, "TIME_BITS": 42}) == ["django_snowflake.E005"]
    assert ids({**STATIC, "DATACENTER_BITS": 5}) == ["django_snowflake.E005"]
    # Taking the bits from the worker field makes room.
    assert ids({**STATIC, "DATACENTER_BITS": 5, "WORKER_BITS": 5}) == []


def test_E006_no_time_bits() -> None:
    assert ids({**STATIC, "TIME_BITS": 0}) == ["django_snowflake.E006"]


@pytest.mark.parametrize(
    "epoch",
    [
        "yesterday",
        "2025-01-01T00:00:00",  # no time zone
        datetime(2025, 1, 1),  # naive
        "1969-12-31T00:00:00Z",
        -1,
        1.5e12,
        True,
        None,
    ],
)
def test_E010_invalid_epoch(epoch: object) -> None:
    assert ids({**STATIC, "EPOCH": epoch}) == ["django_snowflake.E010"]


@pytest.mark.parametrize("spelling", ["iso", "datetime", "huge int"])
def test_E011_epoch_in_future(spelling: str) -> None:
    # Computed here, not at collection: pytest-xdist workers must collect the same IDs.
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    epoch = {
        "iso": tomorrow.isoformat(),
        "datetime": tomorrow,
        "huge int": 10**20,  # beyond datetime's range: the message must not overflow
    }[spelling]
    assert ids({**STATIC, "EPOCH": epoch}) == ["django_snowflake.E011"]


@pytest.mark.parametrize("unit", [0, -10, "1", 1.0, True])
def test_E012_invalid_time_unit(unit: object) -> None:
    assert ids({**STATIC, "TIME_UNIT_MS": unit}) == ["django_snowflake.E012"]


def test_E013_lifespan_ended() -> None:
    # 2**20 ms is 17 minutes after the epoch.
    assert ids({**STATIC, "TIME_BITS": 20, "EPOCH": "2025-01-01T00:00:00Z"}) == [
        "django_snowflake.E013"
    ]


@pytest.mark.parametrize("keys", ["triggers", "", None, 1])
def test_E054_mariadb_keys_not_a_path(keys: object) -> None:
    assert ids({**STATIC, "MARIADB_KEYS": keys}) == ["django_snowflake.E054"]


@pytest.mark.parametrize("keys", ["default", "trigger"])
def test_mariadb_keys_either_path(keys: str) -> None:
    assert ids({**STATIC, "MARIADB_KEYS": keys}) == []


def test_W010_lifespan_nearly_over() -> None:
    # 2**20 one-second units is about 12 days; start 95 % of it ago.
    lifespan_ms = 2**20 * 1000
    epoch = int(datetime.now(UTC).timestamp() * 1000) - lifespan_ms * 95 // 100
    settings = {**STATIC, "TIME_BITS": 20, "TIME_UNIT_MS": 1000, "EPOCH": epoch}
    assert ids(settings) == ["django_snowflake.W010"]
    # A warning does not keep the generator from being built.
    with override_settings(SNOWFLAKE=settings):
        assert runtime.build().layout.time_bits == 20


def test_long_lifespan_does_not_overflow() -> None:
    # 50 bits of milliseconds end after datetime's year 9999.
    assert ids({**STATIC, "TIME_BITS": 50, "WORKER_BITS": 5, "SEQUENCE_BITS": 8}) == []


@pytest.mark.parametrize(
    ("bits", "expected"),
    [
        ({}, []),
        ({"TIME_BITS": 40, "WORKER_BITS": 7}, []),  # 53 bits: every ID stays below 2**53
        ({"TIME_BITS": 42}, ["django_snowflake.E007"]),
        ({"WORKER_BITS": 8}, ["django_snowflake.E007"]),
        ({"DATACENTER_BITS": 1}, ["django_snowflake.E007"]),
    ],
)
def test_E007_js_safe_ids_above_2_53(bits: dict[str, int], expected: list[str]) -> None:
    assert ids({**STATIC, "LAYOUT": "js_safe", **bits}) == expected
    # Other presets promise nothing about JavaScript (54 bits of twitter are fine).
    assert ids({**STATIC, "WORKER_BITS": 1}) == []


def test_E007_names_the_date_ids_pass_2_53() -> None:
    with override_settings(SNOWFLAKE={**STATIC, "LAYOUT": "js_safe", "TIME_BITS": 42}):
        (message,) = check_settings()
    # 41 bits of milliseconds above the 12 low bits reach 2**53 after 2**41 ms from 2025.
    assert "2094-09-07" in str(message.msg)


def test_E007_bound_js_safe_at_53_bits_works() -> None:
    snowflake = {**STATIC, "LAYOUT": "js_safe", "TIME_BITS": 40, "WORKER_BITS": 7}
    with override_settings(SNOWFLAKE=snowflake):
        generator = runtime.build()
        assert generator.layout.max_id < 2**53
        assert 0 < generator.next_id() < 2**53


@pytest.mark.parametrize(
    ("snowflake", "expected"),
    [
        ({"TIME_UNIT_MS": 45_000}, []),  # 3/4 of the default 60 s lease
        ({"TIME_UNIT_MS": 45_001}, ["django_snowflake.E014"]),
        ({"TIME_UNIT_MS": 3_600_000}, ["django_snowflake.E014"]),
        ({"TIME_UNIT_MS": 3_600_000, "LEASE_SECONDS": 4800}, []),
        ({"TIME_UNIT_MS": 3001, "LEASE_SECONDS": 4}, ["django_snowflake.E014"]),
        # Units are the layout's: baidu's are seconds.
        ({"LAYOUT": "baidu", "LEASE_SECONDS": 3}, []),
        # Only the database allocator leases time; a fixed worker ID has no lease.
        ({**STATIC, "TIME_UNIT_MS": 3_600_000}, []),
    ],
)
def test_E014_time_unit_longer_than_the_lease_reserves(
    snowflake: dict[str, Any], expected: list[str]
) -> None:
    assert ids(snowflake) == expected


def test_E014_hint_gives_the_lease_that_fits() -> None:
    with override_settings(SNOWFLAKE={"TIME_UNIT_MS": 3_600_000}):
        (message,) = check_settings()
    assert "LEASE_SECONDS to 4800" in str(message.hint)


@pytest.mark.parametrize(
    ("snowflake", "expected"),
    [
        ({"CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 45_000}, []),
        ({"CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 45_001}, ["django_snowflake.E023"]),
        (
            {"CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 3001, "LEASE_SECONDS": 4},
            ["django_snowflake.E023"],
        ),
        ({"CLOCK_ROLLBACK": "wait", "MAX_ROLLBACK_MS": 60_000}, []),
        ({**STATIC, "CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 60_000}, []),
    ],
)
def test_E023_borrow_further_ahead_than_the_lease_reserves(
    snowflake: dict[str, Any], expected: list[str]
) -> None:
    assert ids(snowflake) == expected


def _generates_on_the_database(snowflake: dict[str, Any], count: int) -> list[int]:
    """``count`` IDs from the database allocator under ``snowflake``, or a failure after 20 s
    (a setting the checks pass must not hang)."""
    from django_snowflake.models import WorkerNode

    layout = runtime.conf.get_layout()
    # The database's own key slot (PostgreSQL, MariaDB) was leased under the test layout.
    WorkerNode.objects.exclude(layout=layout.fingerprint).delete()
    found: list[int] = []
    worker = threading.Thread(target=lambda: found.extend(runtime.get_generator().next_ids(count)))
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "generating hangs under settings that pass check"
    assert len(set(found)) == count
    return found


@pytest.mark.django_db(transaction=True)
def test_E014_bound_a_unit_of_three_quarters_of_the_lease_works() -> None:
    snowflake = {"TIME_UNIT_MS": 3000, "LEASE_SECONDS": 4}
    assert ids(snowflake) == []
    with override_settings(SNOWFLAKE=snowflake):
        _generates_on_the_database(snowflake, 3)


@pytest.mark.django_db(transaction=True)
def test_E023_bound_borrowing_three_quarters_of_the_lease_works() -> None:
    snowflake = {"CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 3000, "LEASE_SECONDS": 4}
    assert ids(snowflake) == []
    with override_settings(SNOWFLAKE=snowflake):
        # Twenty units' worth of sequence at once: the generator borrows units ahead.
        found = _generates_on_the_database(snowflake, 20 * 4096)
    assert found == sorted(found)


@pytest.mark.parametrize("policy", ["retry", "", None, "WAIT"])
def test_E020_unknown_rollback_policy(policy: object) -> None:
    assert ids({**STATIC, "CLOCK_ROLLBACK": policy}) == ["django_snowflake.E020"]


@pytest.mark.parametrize("bound", [-1, "5", 5.0, True, None, 60_001, 10**9])
def test_E021_invalid_max_rollback(bound: object) -> None:
    assert ids({**STATIC, "MAX_ROLLBACK_MS": bound}) == ["django_snowflake.E021"]


def test_E022_clock_sequence_without_bits() -> None:
    assert ids({**STATIC, "CLOCK_ROLLBACK": "clock_sequence"}) == ["django_snowflake.E022"]
    bits = {"CLOCK_SEQUENCE_BITS": 2, "WORKER_BITS": 8}
    assert ids({**STATIC, **bits, "CLOCK_ROLLBACK": "clock_sequence"}) == []


@pytest.mark.parametrize(
    "allocator",
    [
        "redis",
        "no.such.module.Allocator",
        "collections.OrderedDict",  # a class, but no BaseAllocator
        "django_snowflake.allocators.static.hostname_ordinal",  # not a class
        "django_snowflake.allocators.base.BaseAllocator",  # the interface, no allocator
        42,
    ],
)
def test_E030_invalid_allocator(allocator: object) -> None:
    assert ids({**STATIC, "WORKER_ALLOCATOR": allocator}) == ["django_snowflake.E030"]


def test_E030_accepts_dotted_path_to_subclass() -> None:
    assert ids({"WORKER_ALLOCATOR": f"{__name__}.CustomAllocator"}) == []


@pytest.mark.parametrize(
    "allocator", ["static", "django_snowflake.allocators.static.StaticAllocator"]
)
def test_E031_static_without_worker_id(monkeypatch: pytest.MonkeyPatch, allocator: str) -> None:
    assert ids({"WORKER_ALLOCATOR": allocator}) == ["django_snowflake.E031"]
    monkeypatch.setenv("SNOWFLAKE_WORKER_ID", "  ")
    assert ids({"WORKER_ALLOCATOR": allocator}) == ["django_snowflake.E031"]


@pytest.mark.parametrize("worker_id", [1024, -1, "3", 2.0, True])
def test_E032_worker_id_out_of_range(worker_id: object) -> None:
    assert ids({**STATIC, "WORKER_ID": worker_id}) == ["django_snowflake.E032"]
    # The range follows the layout: js_safe has 6 worker bits.
    if worker_id == 1024:
        assert ids({**STATIC, "LAYOUT": "js_safe", "WORKER_ID": 64}) == ["django_snowflake.E032"]


@pytest.mark.parametrize(
    ("snowflake", "says"),
    [
        ({"WORKER_ID": "3"}, "The worker ID '3' (from WORKER_ID) must be an integer."),
        ({"WORKER_ID": 2.0}, "The worker ID 2.0 (from WORKER_ID) must be an integer."),
        ({"WORKER_ID": 1024}, "The worker ID 1024 (from WORKER_ID) is outside 0..1023."),
        ({"WORKER_ID": 1, "DATACENTER_ID": "0"}, "DATACENTER_ID must be an integer, not '0'."),
        ({"WORKER_ID": 1, "DATACENTER_ID": 1}, "DATACENTER_ID 1 is outside 0..0."),
    ],
)
def test_E032_E033_say_what_is_wrong(snowflake: dict[str, Any], says: str) -> None:
    # A quoted number is not "outside 0..1023": it is not a number.
    with override_settings(SNOWFLAKE={"WORKER_ALLOCATOR": "static", **snowflake}):
        (message,) = check_settings()
    assert str(message.msg) == says
    assert ("without quotes" in str(message.hint)) == ("integer" in says)


# The allocators that read the worker ID from the environment, how they find it there, and
# the check that refuses it out of range: one table of IDs for them all.
ENVIRONMENT_ALLOCATORS = [
    ("static", "SNOWFLAKE_WORKER_ID", "{}", "django_snowflake.E032"),
    ("hostname", "HOSTNAME", "web-{}", "django_snowflake.E038"),
    (
        "django_snowflake.allocators.static.HostnameAllocator",
        "HOSTNAME",
        "web-{}",
        "django_snowflake.E038",
    ),
]


@pytest.mark.parametrize(("allocator", "variable", "spelling", "error"), ENVIRONMENT_ALLOCATORS)
@pytest.mark.parametrize(("worker_id", "in_range"), [(7, True), (1023, True), (1024, False)])
def test_E032_E038_worker_id_from_environment(
    monkeypatch: pytest.MonkeyPatch,
    allocator: str,
    variable: str,
    spelling: str,
    error: str,
    worker_id: int,
    in_range: bool,
) -> None:
    monkeypatch.setenv(variable, spelling.format(worker_id))
    assert ids({"WORKER_ALLOCATOR": allocator}) == ([] if in_range else [error])


def test_E032_worker_id_from_environment_not_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNOWFLAKE_WORKER_ID", "web")
    assert ids({"WORKER_ALLOCATOR": "static"}) == ["django_snowflake.E032"]


@pytest.mark.parametrize("environ", ["1024", "web"])
def test_E032_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch, environ: str) -> None:
    monkeypatch.setenv("SNOWFLAKE_WORKER_ID", environ)
    with override_settings(SNOWFLAKE={"WORKER_ALLOCATOR": "static"}):
        assert "$SNOWFLAKE_WORKER_ID" in check_settings()[0].msg


@pytest.mark.parametrize("environ", ["7", "1023", "1024", "web"])
def test_E032_worker_id_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, environ: str
) -> None:
    monkeypatch.setenv("SNOWFLAKE_WORKER_ID", environ)
    assert ids({"WORKER_ALLOCATOR": "static", "WORKER_ID": 5}) == []


@pytest.mark.parametrize("datacenter_id", [1, -1, "0", None])
def test_E033_datacenter_id_out_of_range(datacenter_id: object) -> None:
    assert ids({**STATIC, "DATACENTER_ID": datacenter_id}) == ["django_snowflake.E033"]


def test_E033_datacenter_id_in_range_with_bits() -> None:
    bits = {"DATACENTER_BITS": 2, "WORKER_BITS": 8}
    assert ids({**STATIC, **bits, "DATACENTER_ID": 3}) == []
    assert ids({**STATIC, **bits, "DATACENTER_ID": 4}) == ["django_snowflake.E033"]


@pytest.mark.parametrize("alias", ["other", "", None, ["default"]])
def test_E034_unknown_database_alias(alias: object) -> None:
    assert ids({**STATIC, "DATABASE": alias}) == ["django_snowflake.E034"]


@pytest.mark.parametrize("lease", [2, 0, "60", 60.0, True])
def test_E035_invalid_lease_seconds(lease: object) -> None:
    assert ids({**STATIC, "LEASE_SECONDS": lease}) == ["django_snowflake.E035"]


@pytest.mark.parametrize("label", [None, 5, "x" * 101])
def test_E036_invalid_process_label(label: object) -> None:
    assert ids({**STATIC, "PROCESS_LABEL": label}) == ["django_snowflake.E036"]
    assert ids({**STATIC, "PROCESS_LABEL": "x" * 100}) == []


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_E037_claim_on_ready_not_bool(value: object) -> None:
    assert ids({**STATIC, "CLAIM_ON_READY": value}) == ["django_snowflake.E037"]


@pytest.mark.parametrize(
    "allocator", ["hostname", "django_snowflake.allocators.static.HostnameAllocator"]
)
@pytest.mark.parametrize("hostname", ["web", "web-3.example.com"])
def test_E038_hostname_without_ordinal(
    monkeypatch: pytest.MonkeyPatch, allocator: str, hostname: str
) -> None:
    monkeypatch.setenv("HOSTNAME", hostname)
    assert ids({"WORKER_ALLOCATOR": allocator}) == ["django_snowflake.E038"]


def test_several_errors_at_once() -> None:
    assert ids({**STATIC, "LAYOUT": "nope", "CLOCK_ROLLBACK": "nope", "DATABASE": "nope"}) == [
        "django_snowflake.E003",
        "django_snowflake.E020",
        "django_snowflake.E034",
    ]


# Settings that are wrong in ways that once crashed the checks, or build(), instead of
# being reported.
BAD_SETTINGS = [
    "twitter",
    {"LAYOUT": "nope"},
    {"TIME_BITS": "41"},
    {"EPOCH": 10**20},
    {"DATABASE": ["default"]},
    {1: 2, "FOO": 3},
    {"WORKER_ALLOCATOR": "static"},
    {"WORKER_ALLOCATOR": "django_snowflake.allocators.static.StaticAllocator"},
    {"WORKER_ALLOCATOR": "django_snowflake.allocators.static.HostnameAllocator"},
    {"WORKER_ALLOCATOR": "static", "WORKER_ID": 10**6},
]


@pytest.mark.parametrize("snowflake", BAD_SETTINGS)
def test_build_refuses_invalid_settings(monkeypatch: pytest.MonkeyPatch, snowflake: object) -> None:
    monkeypatch.setenv("HOSTNAME", "web")
    with override_settings(SNOWFLAKE=snowflake):
        assert any(message.is_serious() for message in check_settings())
        with pytest.raises(ImproperlyConfigured, match=r"manage\.py check"):
            runtime.build()
        with pytest.raises(ImproperlyConfigured, match=r"django_snowflake\.E0\d\d"):
            runtime.get_generator()


@pytest.mark.parametrize("snowflake", BAD_SETTINGS)
def test_ready_never_raises_on_invalid_settings(
    monkeypatch: pytest.MonkeyPatch, snowflake: object
) -> None:
    monkeypatch.setenv("HOSTNAME", "web")
    with override_settings(SNOWFLAKE=snowflake):
        apps.get_app_config("django_snowflake").ready()


def _code_check_ids() -> list[str]:
    """Every check ID written in the package's code, once per place it is emitted.

    A check ID is a string literal that is exactly ``"E012"`` (the argument of
    ``_error``/``_warning``) or ``"django_snowflake.E040"`` (``id=`` of a CheckMessage);
    reading the AST skips docstrings and comments that merely mention an ID.
    """
    found = []
    pattern = re.compile(r"(?:django_snowflake\.)?([EW]\d{3})")
    for path in sorted((ROOT / "django_snowflake").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = pattern.fullmatch(node.value)
                if match:
                    found.append(f"django_snowflake.{match.group(1)}")
    return found


def test_check_ids_are_unique_and_documented() -> None:
    code = _code_check_ids()
    assert code, "no check IDs found: has the way checks are written changed?"
    assert [check_id for check_id, count in Counter(code).items() if count > 1] == []
    documented = re.findall(
        r"django_snowflake\.[EW]\d{3}", (ROOT / "docs" / "checks.rst").read_text()
    )
    assert sorted(set(code) - set(documented)) == [], "undocumented check IDs"
    assert sorted(set(documented) - set(code)) == [], "documented IDs the code never emits"


# check --deploy: W031-W034.


def deploy_ids(snowflake: Any, **django_settings: Any) -> list[str]:
    """The IDs ``check --deploy`` adds under ``SNOWFLAKE = snowflake``, through Django's
    registry: only with ``include_deployment_checks``."""
    with override_settings(SNOWFLAKE=snowflake, **django_settings):
        assert [m for m in run_checks(tags=[DEPLOYMENT]) if "snowflake" in (m.id or "")] == []
        messages = run_checks(tags=[DEPLOYMENT], include_deployment_checks=True)
    for message in messages:
        assert message.hint and message.level == WARNING, message.id
    return [message.id or "" for message in messages]


POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop"}


@pytest.mark.parametrize(
    ("snowflake", "databases", "expected"),
    [
        # Every process of every server is worker 1.
        (STATIC, None, ["django_snowflake.W031"]),
        # Each process told its own ID by its environment: fine.
        ({"WORKER_ALLOCATOR": "static"}, None, []),
        ({"WORKER_ALLOCATOR": "hostname"}, None, []),
        # The database allocator on a server: fine with the default lease.
        ({}, POSTGRES, []),
        ({"LEASE_SECONDS": 30}, POSTGRES, []),
        ({"LEASE_SECONDS": 29}, POSTGRES, ["django_snowflake.W032"]),
        # On SQLite only one machine shares the worker table.
        ({}, None, ["django_snowflake.W033"]),
        ({"LEASE_SECONDS": 10}, None, ["django_snowflake.W032", "django_snowflake.W033"]),
        (
            {**STATIC, "CLOCK_ROLLBACK": "raise"},
            None,
            ["django_snowflake.W031", "django_snowflake.W034"],
        ),
        # Invalid settings: the errors of check come first.
        ({"WORKER_ALLOCATOR": "static", "WORKER_ID": "x"}, None, []),
    ],
)
@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_deploy_checks(
    snowflake: dict[str, Any],
    databases: dict[str, Any] | None,
    expected: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if snowflake.get("WORKER_ALLOCATOR") == "static" and "WORKER_ID" not in snowflake:
        monkeypatch.setenv("SNOWFLAKE_WORKER_ID", "3")
    if snowflake.get("WORKER_ALLOCATOR") == "hostname":
        monkeypatch.setenv("HOSTNAME", "web-3")
    # Only the worker table's alias matters; the tests' own database stays as it is.
    django_settings = {}
    if databases is not None:
        from django.conf import settings

        django_settings["DATABASES"] = {**settings.DATABASES, "workers": databases}
        snowflake = {**snowflake, "DATABASE": "workers"}
    elif "sqlite" not in connection.vendor:
        from django.conf import settings

        sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "workers.sqlite3"}
        django_settings["DATABASES"] = {**settings.DATABASES, "workers": sqlite}
        snowflake = {**snowflake, "DATABASE": "workers"}
    assert deploy_ids(snowflake, **django_settings) == expected


@pytest.mark.parametrize("schema", ["", "   ", 5, None, "x" * 64, "é" * 32, "pg_temp", "PG_x"])
def test_E052_function_schema_not_a_schema_name(schema: object) -> None:
    assert ids({**STATIC, "FUNCTION_SCHEMA": schema}) == ["django_snowflake.E052"]


@pytest.mark.parametrize("schema", ["public", "snowflake", "x" * 63, "Tenant Keys"])
def test_E052_accepts_schema_names(schema: str) -> None:
    assert ids({**STATIC, "FUNCTION_SCHEMA": schema}) == []
