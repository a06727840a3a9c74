"""Before production (``check --deploy``): W031-W034, settings that pass ``check`` but that a
production deploy gets wrong."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage
from django.utils.translation import gettext_lazy as _

from .. import conf, runtime
from ..allocators.database import DatabaseAllocator
from ..allocators.static import StaticAllocator
from .settings import _warning, allocator_class

# The tag of the checks that run with check --deploy only (Django has no such tag of its own).
DEPLOYMENT = "deployment"
# Patroni's default leader ttl: the shortest automatic failover of the setups the
# high-availability page lists (RDS Multi-AZ takes one to two minutes).
FAILOVER_SECONDS = 30


def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W031-W034: settings that pass ``check`` but that a production deploy gets wrong."""
    if runtime.settings_errors():
        return []  # the errors come first
    values = conf.get_settings()
    allocator = allocator_class(values)
    messages: list[CheckMessage] = []
    static = allocator is not None and issubclass(allocator, StaticAllocator)
    if static and values["WORKER_ID"] is not None:
        messages.append(
            _warning(
                "W031",
                _(
                    "The static allocator takes the worker ID %(value)s from the settings: "
                    "every process started with them, on every server, issues IDs as "
                    "worker %(value)s, and two such processes issue the same IDs."
                ),
                _(
                    "Remove WORKER_ID and give each process its own ID in the %(variable)s "
                    "environment variable, or use the database allocator, which leases a "
                    "slot per process. If only ever one process runs these settings, add "
                    '"django_snowflake.W031" to SILENCED_SYSTEM_CHECKS.'
                ),
                value=values["WORKER_ID"],
                variable=conf.WORKER_ID_ENV,
            )
        )
    if allocator is not None and issubclass(allocator, DatabaseAllocator):
        lease = values["LEASE_SECONDS"]
        if lease < FAILOVER_SECONDS:
            messages.append(
                _warning(
                    "W032",
                    _(
                        "LEASE_SECONDS is %(value)s, shorter than a database failover "
                        "(%(failover)s seconds or more): during one, the leases of every process "
                        "run out and generating IDs raises WorkerLeaseLost until the database "
                        "is back."
                    ),
                    _(
                        "Use 60 (the default) or more; a longer lease only delays the reuse of "
                        'a crashed process\'s slot (docs: "High-availability databases").'
                    ),
                    value=lease,
                    failover=FAILOVER_SECONDS,
                )
            )
        alias = values["DATABASE"]
        engine = settings.DATABASES[alias].get("ENGINE", "")
        if engine.endswith("sqlite3"):
            messages.append(
                _warning(
                    "W033",
                    _(
                        "The worker table is in the SQLite database %(alias)s, which only the "
                        "processes of one machine share: a second server with its own file "
                        "claims the same worker IDs and issues the same IDs."
                    ),
                    _(
                        'For several servers, put the worker table (SNOWFLAKE["DATABASE"]) '
                        "on a PostgreSQL or MariaDB database they all reach. If only ever one "
                        'machine runs these settings, add "django_snowflake.W033" to '
                        "SILENCED_SYSTEM_CHECKS."
                    ),
                    alias=repr(alias),
                )
            )
    if values["CLOCK_ROLLBACK"] == "raise":
        messages.append(
            _warning(
                "W034",
                _(
                    "CLOCK_ROLLBACK is 'raise': every step back of the server's clock, even an "
                    "NTP correction of a millisecond, makes generating an ID raise "
                    "ClockMovedBackwards."
                ),
                _(
                    "Use 'wait' (the default), which sleeps through steps of up to "
                    "MAX_ROLLBACK_MS and raises only beyond them."
                ),
            )
        )
    return messages
