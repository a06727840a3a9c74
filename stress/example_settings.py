"""The example shop's settings on a database of the stress run's choosing.

The example reads only ``EXAMPLE_DB`` (another SQLite file); PostgreSQL and MariaDB need
``DATABASES`` replaced, so this module takes the example's settings and overrides them from
``STRESS_DB_VENDOR``, ``STRESS_DB_NAME``, ``_HOST``, ``_PORT`` and ``_USER``. It needs
``example_project/`` on ``sys.path`` (the servers scenario puts it on ``PYTHONPATH``).
"""

from __future__ import annotations

import os
from typing import Any

from config.settings import *  # noqa: F403

_vendor = os.environ.get("STRESS_DB_VENDOR", "sqlite")
_engines = {
    "sqlite": "django.db.backends.sqlite3",
    "postgresql": "django.db.backends.postgresql",
    "mariadb": "django.db.backends.mysql",
}
_database: dict[str, Any] = {"ENGINE": _engines[_vendor], "NAME": os.environ["STRESS_DB_NAME"]}
if _vendor == "sqlite":
    _database["OPTIONS"] = {"timeout": 20}
else:
    _database.update(
        HOST=os.environ["STRESS_DB_HOST"],
        PORT=os.environ["STRESS_DB_PORT"],
        USER=os.environ["STRESS_DB_USER"],
        PASSWORD="",
        CONN_MAX_AGE=60,
    )
    if _vendor == "mariadb":
        _database["OPTIONS"] = {"charset": "utf8mb4"}
DATABASES = {"default": _database}

DEBUG = False
# The load generator authenticates every request with HTTP Basic: a fast hash keeps the
# password check from dominating the figures.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SNOWFLAKE = {"PROCESS_LABEL": "web"}
