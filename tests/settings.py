"""Django settings for the test suite.

``SNOWFLAKE_TEST_DB`` picks the database: ``sqlite`` (the default), ``postgresql`` or
``mariadb``. ``SNOWFLAKE_TEST_DB_HOST``, ``_PORT``, ``_USER``, ``_PASSWORD`` and ``_NAME``
override the connection defaults of the two servers.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from harness.databases import SERVER_DEFAULTS

BASE_DIR = Path(__file__).resolve().parent


# Test databases are named per run, so concurrent runs (tox -p, several checkouts) never
# create or drop each other's; subprocesses are given the name they must use.
RUN = os.environ.get("SNOWFLAKE_TEST_RUN", str(os.getpid()))


def get_db_conf() -> dict[str, Any]:
    """Return the ``default`` database chosen by ``SNOWFLAKE_TEST_DB``."""
    vendor = os.environ.get("SNOWFLAKE_TEST_DB", "sqlite")
    if vendor == "sqlite":
        # A file rather than ":memory:", so that other processes (fork, subprocesses)
        # see the same tables; pytest-xdist gives each worker its own file.
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SNOWFLAKE_TEST_DB_NAME", str(BASE_DIR / ".test_db.sqlite3")),
            "TEST": {"NAME": str(BASE_DIR / f".test_db_test_{RUN}.sqlite3")},
            "OPTIONS": {"timeout": 20},
        }
    if vendor not in SERVER_DEFAULTS:
        choices = ", ".join(["sqlite", *SERVER_DEFAULTS])
        raise ImproperlyConfigured(
            f"SNOWFLAKE_TEST_DB={vendor!r} is not a supported test database; use one of {choices}."
        )
    conf = copy.deepcopy(SERVER_DEFAULTS[vendor])
    conf.setdefault("TEST", {})["NAME"] = f"test_django_snowflake_{RUN}"
    for key in ("HOST", "PORT", "USER", "PASSWORD", "NAME"):
        conf[key] = os.environ.get(f"SNOWFLAKE_TEST_DB_{key}", conf[key])
    return conf


DATABASES = {"default": get_db_conf()}

SECRET_KEY = "django_snowflake-tests-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_snowflake",
    "tests.testapp",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            # What the admin's checks ask for: admin.E402, admin.E404 and admin.W411.
            "context_processors": [
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.request",
            ],
        },
    },
]

ROOT_URLCONF = "tests.urls"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Fast hashing for the admin users the tests create.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The recommended settings for a project's test suite (docs: "Testing"): a fixed worker ID
# needs no lease, so the database blocker, TestCase transactions and SQLite's single writer
# never meet a claim. The allocator's own tests switch to the database allocator.
# Subprocesses started by the tests pass their own SNOWFLAKE as JSON.
SNOWFLAKE: dict[str, Any] = json.loads(
    os.environ.get("SNOWFLAKE_TEST_SETTINGS", '{"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}')
)
# SNOWFLAKE_TEST_MARIADB_KEYS=trigger runs the suite on MariaDB's strict path (issue 26).
if os.environ.get("SNOWFLAKE_TEST_MARIADB_KEYS"):
    SNOWFLAKE.setdefault("MARIADB_KEYS", os.environ["SNOWFLAKE_TEST_MARIADB_KEYS"])
