from __future__ import annotations

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    # The one-line switch: every model here without an explicit pk gets a SnowflakeAutoField.
    default_auto_field = "django_snowflake.fields.SnowflakeAutoField"
