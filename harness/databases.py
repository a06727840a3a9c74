"""The shared database servers of the project's machines (README): the connection defaults
that the test settings, the benchmarks' settings and the stress runs start from.

``SNOWFLAKE_TEST_DB_HOST``, ``_PORT``, ``_USER`` and ``_PASSWORD`` override them where each
reads them (tests/settings.py, benchmarks/settings.py).
"""

from __future__ import annotations

from typing import Any

SERVER_DEFAULTS: dict[str, dict[str, Any]] = {
    "postgresql": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "django_snowflake",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": "127.0.0.1",
        "PORT": "5432",
    },
    "mariadb": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": "django_snowflake",
        "USER": "root",
        "PASSWORD": "",
        "HOST": "127.0.0.1",
        "PORT": "3306",
        "OPTIONS": {"charset": "utf8mb4"},
        "TEST": {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
    },
}
