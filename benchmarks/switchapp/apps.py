from django.apps import AppConfig


class SwitchConfig(AppConfig):
    """The one-line switch, for this app's models only (the benchmarks' default stays
    ``BigAutoField``): every implicit key is a ``SnowflakeAutoField``."""

    name = "benchmarks.switchapp"
    label = "switch"
    default_auto_field = "django_snowflake.fields.SnowflakeAutoField"
