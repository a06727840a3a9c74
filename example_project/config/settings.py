"""Settings of the example shop: SQLite, every model keyed by Snowflake IDs.

``EXAMPLE_DB`` names another SQLite file (the tests use a temporary one);
``EXAMPLE_POSTGRES`` (``host:port/name``) a PostgreSQL database instead, as user
``postgres``; ``EXAMPLE_LEASE_SECONDS`` another LEASE_SECONDS (the monitoring test's short
leases).
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-shop-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_snowflake",
    # Prometheus metrics (the prometheus extra), served at /metrics (config/urls.py).
    "django_snowflake.metrics.MetricsConfig",
    # django-health-check (the health extra): /health/ lists the package's checks with the
    # database's, and `manage.py health_check health_check` asks a running server.
    "health_check",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language from the switcher in the admin (the set_language view), else the browser's.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # templates/admin/base_site.html adds the language switcher to the admin's header.
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("EXAMPLE_DB", BASE_DIR / "db.sqlite3"),
        # The worker lease is written on its own connection: wait for the other writer.
        "OPTIONS": {"timeout": 20},
    }
}
if os.environ.get("EXAMPLE_POSTGRES"):
    address, _, name = os.environ["EXAMPLE_POSTGRES"].partition("/")
    host, _, port = address.partition(":")
    DATABASES["default"] = {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": host,
        "PORT": port,
        "NAME": name,
        "USER": "postgres",
        # A probe or a request fails in 3 s while the database is away, not after the
        # system's TCP timeout.
        "OPTIONS": {"connect_timeout": 3},
    }

# One line gives every model of the project Snowflake keys (shop.Order and shop.OrderItem
# also show the other way, SnowflakeModel).
DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"

# The defaults: the twitter layout, worker IDs leased through the WorkerNode table. Each
# process claims its slot at its first request, so the readiness probe (/ready/) finds it held.
SNOWFLAKE = {
    "PROCESS_LABEL": "web",
    "CLAIM_ON_READY": True,
    "LEASE_SECONDS": int(os.environ.get("EXAMPLE_LEASE_SECONDS", 60)),
}

LANGUAGE_CODE = "en-us"
# The languages django_snowflake ships translations for.
LANGUAGES = [
    ("en", "English"),
    ("de", "Deutsch"),
    ("fr", "Français"),
    ("es", "Español"),
    ("pt-br", "Português (Brasil)"),
    ("ja", "日本語"),
    ("zh-hans", "简体中文"),
]
TIME_ZONE = "Europe/Berlin"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"

REST_FRAMEWORK = {
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
}
