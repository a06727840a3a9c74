"""System checks, numbered by subject; this package gathers them, the allocators judge theirs.

E001-E009 bits and layout, E010-E019 epoch and time unit, E020-E029 rollback policy,
E030-E039 allocator, worker and database (W031-W034 also for ``check --deploy``), E040-E049
(W040-W049) fields and models, E050-E059 (W050-W059) the databases' own function.
Every message and hint is translated when it is shown.

A module a subject: :mod:`.settings` judges ``settings.SNOWFLAKE``, :mod:`.databases` reads
the worker table and each database's function, :mod:`.deployment` is ``check --deploy``'s,
:mod:`.models` the project's models and admins. ``AppConfig.ready()`` registers the
``check_*`` functions named here.
"""

from __future__ import annotations

from .databases import (
    check_database_clocks,
    check_database_functions,
    check_standbys,
    check_worker_table,
)
from .deployment import DEPLOYMENT, FAILOVER_SECONDS, check_deployment
from .models import (
    NARROW_INTEGER_TYPES,
    SWITCH,
    check_admin_mixin,
    check_auto_field_switch,
    check_generic_relations,
    check_historical_records,
    is_historical,
    is_installed_package,
    is_snowflake_keyed,
    project_directory,
)
from .settings import (
    JS_SAFE_BITS,
    MAX_IDENTIFIER_BYTES,
    MAX_ROLLBACK_LIMIT_MS,
    allocator_class,
    check_settings,
)

__all__ = [
    "DEPLOYMENT",
    "FAILOVER_SECONDS",
    "JS_SAFE_BITS",
    "MAX_IDENTIFIER_BYTES",
    "MAX_ROLLBACK_LIMIT_MS",
    "NARROW_INTEGER_TYPES",
    "SWITCH",
    "allocator_class",
    "check_admin_mixin",
    "check_auto_field_switch",
    "check_database_clocks",
    "check_database_functions",
    "check_deployment",
    "check_generic_relations",
    "check_historical_records",
    "check_settings",
    "check_standbys",
    "check_worker_table",
    "is_historical",
    "is_installed_package",
    "is_snowflake_keyed",
    "project_directory",
    "settings_errors",
]


def settings_errors() -> list[str]:
    """The IDs of the errors that keep the settings from building a generator: the verdict
    ``AppConfig.ready()`` hands to :func:`django_snowflake.runtime.configure`."""
    # check_settings as this package names it, so that a test replacing it here counts it.
    return [message.id or "" for message in check_settings() if message.is_serious()]
