from __future__ import annotations

from django.apps import AppConfig


class ChecksAppConfig(AppConfig):
    """A project's app as ``startapp`` writes it, pinning BigAutoField (for W040)."""

    name = "tests.checks_app"
    label = "checks_app"
    default_auto_field = "django.db.models.BigAutoField"
