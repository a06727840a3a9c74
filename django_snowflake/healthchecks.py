"""Checks for django-health-check 4 (the ``health`` extra): :class:`Readiness` and
:class:`DatabaseKeys`, over :mod:`django_snowflake.health`.

List them in the view's checks::

    from health_check.views import HealthCheckView

    urlpatterns = [
        path("ready/", HealthCheckView.as_view(checks=["django_snowflake.healthchecks.Readiness"])),
        path("health/", HealthCheckView.as_view(checks=[
            "health_check.checks.Database",
            "django_snowflake.healthchecks.Readiness",
            "django_snowflake.healthchecks.DatabaseKeys",
        ]), name="health_check"),
    ]
"""

from __future__ import annotations

import dataclasses
import datetime

from django.db import connections
from health_check.base import HealthCheck  # type: ignore[import-untyped]
from health_check.exceptions import ServiceUnavailable  # type: ignore[import-untyped]

from . import health


@dataclasses.dataclass
class Readiness(HealthCheck):  # type: ignore[misc]
    """This process can issue an ID now without waiting (:func:`~django_snowflake.health.readiness`):
    never claims, blocks or queries, so it answers at once."""

    timeout = datetime.timedelta(seconds=1)

    def run(self) -> None:
        verdict = health.readiness()
        if not verdict.ready:
            raise ServiceUnavailable(verdict.reason)


@dataclasses.dataclass
class DatabaseKeys(HealthCheck):  # type: ignore[misc]
    """Each database's key function is installed, issues under a slot, and its clock is at
    most a second behind the server's (:func:`~django_snowflake.health.database_health`).
    ``alias``: one database (default: every one)."""

    alias: str | None = None

    def run(self) -> None:
        aliases = None if self.alias is None else [self.alias]
        try:
            problems = [entry for entry in health.database_health(aliases) if not entry.healthy]
        finally:
            # django-health-check runs a synchronous check on a thread of its executor: the
            # connections opened there would stay open with it.
            for connection in connections.all(initialized_only=True):
                connection.close()
        if problems:
            raise ServiceUnavailable(
                "; ".join(f"{entry.database}: {entry.problem}" for entry in problems)
            )
