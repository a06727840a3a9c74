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
    # WAL without a sync per commit: the run loads the ID generation and the servers, not
    # the disk's fsync latency (about 17 ms per INSERT here in SQLite's default mode).
    _database["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    _database.update(
        HOST=os.environ["STRESS_DB_HOST"],
        PORT=os.environ["STRESS_DB_PORT"],
        USER=os.environ["STRESS_DB_USER"],
        PASSWORD="",
        # Persistent connections under gunicorn's sync workers; none under ASGI, where each
        # request runs in a thread of its own and would leave its connection open.
        CONN_MAX_AGE=int(os.environ.get("STRESS_CONN_MAX_AGE", "0")),
    )
    if _vendor == "mariadb":
        _database["OPTIONS"] = {"charset": "utf8mb4"}
DATABASES = {"default": _database}

DEBUG = False
# The load generator authenticates every request with HTTP Basic: a fast hash keeps the
# password check from dominating the figures.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SNOWFLAKE = {"PROCESS_LABEL": "web"}

# A 500 must leave its traceback in the server's log (stderr), whatever DEBUG says.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}},
}
