"""The database servers the suites' settings use (``snowflake_suite_settings`` and
``tests.app_suites``' overlay): PostgreSQL at 127.0.0.1:5432 as postgres, MariaDB/MySQL at
127.0.0.1:3306 as root, each changed through ``SNOWFLAKE_SUITE_PG_*`` /
``SNOWFLAKE_SUITE_MYSQL_*`` (``HOST``, ``PORT``, ``USER``, ``PASSWORD``)."""

from __future__ import annotations

import os
from typing import Any

ENGINES = {"postgresql": "postgresql", "mariadb": "mysql"}
DEFAULTS = {"postgresql": ("PG", "5432", "postgres"), "mariadb": ("MYSQL", "3306", "root")}


def server(db: str, name: str) -> dict[str, Any] | None:
    """The settings of database ``name`` on ``db``'s server, or None for SQLite."""
    if db == "sqlite":
        return None
    if db not in ENGINES:
        raise ValueError(f"database {db!r}: sqlite, postgresql or mariadb")
    prefix, port, user = DEFAULTS[db]
    settings: dict[str, Any] = {
        "ENGINE": f"django.db.backends.{ENGINES[db]}",
        "HOST": os.environ.get(f"SNOWFLAKE_SUITE_{prefix}_HOST", "127.0.0.1"),
        "PORT": os.environ.get(f"SNOWFLAKE_SUITE_{prefix}_PORT", port),
        "USER": os.environ.get(f"SNOWFLAKE_SUITE_{prefix}_USER", user),
        "PASSWORD": os.environ.get(f"SNOWFLAKE_SUITE_{prefix}_PASSWORD", ""),
        "NAME": name,
    }
    if db == "mariadb":
        # As Django's developers run its suite there: test databases in utf8mb4 (Django's
        # tests store 4-byte characters).
        settings["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_general_ci"}
    return settings
