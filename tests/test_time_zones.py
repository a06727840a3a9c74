"""The claim reads the database's clock right whatever time zone Django or the server uses
(issue: with SQLite, ``USE_TZ = False`` and a ``TIME_ZONE`` other than UTC, every claim
failed with ClockOffsetTooLarge, hours off)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django.db import connections

from django_snowflake import decode, generate
from django_snowflake.allocators.database import database_now
from django_snowflake.generator import SnowflakeGenerator

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("use_tz", [True, False])
@pytest.mark.parametrize("zone", ["America/Chicago", "Asia/Kolkata"])
def test_a_claim_in_any_django_time_zone(
    database_generator: Callable[..., SnowflakeGenerator],
    settings: pytest.FixtureRequest,
    use_tz: bool,
    zone: str,
) -> None:
    settings.USE_TZ = use_tz  # type: ignore[attr-defined]
    settings.TIME_ZONE = zone  # type: ignore[attr-defined]
    database_generator()
    assert abs(database_now("default").timestamp() - time.time()) < 5
    value = generate()
    assert abs(decode(value).timestamp.timestamp() - time.time()) < 5


def test_a_claim_on_a_mysql_server_in_another_zone(
    database_generator: Callable[..., SnowflakeGenerator], monkeypatch: pytest.MonkeyPatch
) -> None:
    if connections["default"].vendor != "mysql":
        pytest.skip("the session time zone of MySQL and MariaDB")
    options = connections.settings["default"].setdefault("OPTIONS", {})
    # As a server whose system zone is not UTC: every new connection starts in it.
    monkeypatch.setitem(options, "init_command", "SET time_zone = '-05:00'")
    database_generator()
    assert abs(database_now("default").timestamp() - time.time()) < 5
    generate()
