from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.utils.translation import gettext_lazy as _


class SnowflakeConfig(AppConfig):
    name = "django_snowflake"
    verbose_name = _("Snowflake IDs")
    # WorkerNode's own key; pinned so a project's DEFAULT_AUTO_FIELD never churns our migration.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import runtime
        from .checks import check_settings

        checks.register(check_settings)
        runtime.install_process_hooks()
        # Build the generator now when the settings are valid, so the first request does not
        # pay for it; invalid settings are reported by the checks, never raised from here.
        if not runtime.settings_errors():
            runtime.get_generator()
