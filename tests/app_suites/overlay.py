"""The settings overlay of ``tests.app_suites``, applied to a third-party app's own test settings.

The driver chooses the database and the primary key field through the environment: with
``SNOWFLAKE_APP_FIELD=snowflake`` the app's suite runs as a project that turned the switch on
would run it (``DEFAULT_AUTO_FIELD = SnowflakeAutoField``, ``django_snowflake`` installed, the
recommended test settings of docs/testing.rst); with ``default`` its settings are left alone.
On a server, the databases are named per run so that concurrent runs never share one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from suite_servers import server  # type: ignore[import-not-found]  # tests/django_suite

SWITCH = "django_snowflake.fields.SnowflakeAutoField"
SQLITE = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}


def apply(settings: dict[str, Any]) -> dict[str, Any]:
    """Overlay ``settings`` (a settings module's globals or a settings.configure() dict)."""
    db = os.environ.get("SNOWFLAKE_APP_DB", "sqlite")
    name = f"appsuite_{os.getpid()}"
    if server(db, name) is not None:
        settings["DATABASES"] = {
            alias: server(db, name if alias == "default" else f"{name}_{alias}")
            for alias in settings.get("DATABASES", {"default": {}})
        }
    else:
        # Every alias on the database chosen: django-reversion's settings name a "postgres"
        # and a "mysql" alias beside SQLite's, and every test of it uses all three.
        settings["DATABASES"] = {
            alias: conf if conf["ENGINE"].endswith("sqlite3") else SQLITE
            for alias, conf in settings.get("DATABASES", {"default": SQLITE}).items()
        }
    migrations = os.environ.get("SNOWFLAKE_APP_MIGRATIONS")
    if migrations:
        # The test apps' migrations as a project has them after turning the switch on.
        sys.path.insert(0, migrations)
        settings["MIGRATION_MODULES"] = {
            label: f"switch_migrations.{label}"
            for label in os.environ["SNOWFLAKE_APP_MIGRATED"].split()
        }
    if os.environ.get("SNOWFLAKE_APP_FIELD", "default") == "snowflake":
        settings["DEFAULT_AUTO_FIELD"] = SWITCH
        settings["INSTALLED_APPS"] = [*settings["INSTALLED_APPS"], "django_snowflake"]
        settings["SNOWFLAKE"] = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}
    return settings
