from __future__ import annotations

import os
import sys

from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate
from django.urls import register_converter
from django.urls.converters import get_converters
from django.utils.translation import gettext_lazy as _

from . import runtime
from .checks import (
    DEPLOYMENT,
    check_admin_mixin,
    check_auto_field_switch,
    check_database_clocks,
    check_database_functions,
    check_deployment,
    check_generic_relations,
    check_historical_records,
    check_settings,
    check_standbys,
    check_worker_table,
    settings_errors,
)
from .converters import SnowflakeConverter
from .database_keys import install_connection_hooks
from .operations import reinstall_after_migrate

# Management commands that may run before the worker table exists or never generate IDs in
# a server; CLAIM_ON_READY skips them and claims lazily instead.
EAGER_CLAIM_COMMANDS = frozenset({"runserver"})

#: The package's system checks and their tags; ready() registers them. The database ones
#: read the worker table, so they run only when ``check`` is given the database.
CHECKS = (
    (check_settings, ()),
    (check_worker_table, (checks.Tags.database,)),
    (check_standbys, (checks.Tags.database,)),
    (check_database_functions, (checks.Tags.database,)),
    (check_database_clocks, (checks.Tags.database,)),
    (check_auto_field_switch, (checks.Tags.models,)),
    (check_admin_mixin, (checks.Tags.admin,)),
    (check_generic_relations, (checks.Tags.models,)),
    (check_historical_records, (checks.Tags.models,)),
    (check_deployment, (DEPLOYMENT,)),
)
#: Database checks that run with ``check --deploy`` only (``--deploy --database``). Not tagged
#: for deployment: Django 6 runs a check whose tag is asked for on every database.
DEPLOY_DATABASE_CHECKS = frozenset({check_database_clocks})


def claims_eagerly(argv: list[str]) -> bool:
    """Whether ``CLAIM_ON_READY`` claims in this process: servers and workers do; management
    commands other than ``runserver`` and test runners do not."""
    if "pytest" in sys.modules:
        return False
    program = os.path.basename(argv[0]) if argv else ""
    if program in {"manage.py", "django-admin", "django-admin.py", "__main__.py"}:
        if len(argv) < 2 or argv[1] not in EAGER_CLAIM_COMMANDS:
            return False
        # runserver's autoreloader parent only watches files; its child (RUN_MAIN) serves.
        return os.environ.get("RUN_MAIN") == "true" or "--noreload" in argv
    return True


class SnowflakeConfig(AppConfig):
    name = "django_snowflake"
    verbose_name = _("Snowflake IDs")
    # WorkerNode's own key; pinned so a project's DEFAULT_AUTO_FIELD never churns our migration.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Wiring only: what to check, how URLs read IDs, what happens at fork and exit, and
        # the settings judged once, for the generator to be built from.
        for check, tags in CHECKS:
            # Deployment checks run with check --deploy only.
            deploy = DEPLOYMENT in tags or check in DEPLOY_DATABASE_CHECKS
            checks.register(check, *tags, deploy=deploy)
        # ready() runs again when a test changes INSTALLED_APPS; Django 6 refuses to
        # register a converter twice.
        if "snowflake" not in get_converters():
            register_converter(SnowflakeConverter, "snowflake")
        runtime.install_process_hooks()
        post_migrate.connect(reinstall_after_migrate, dispatch_uid="django_snowflake_function")
        # The key function on every connection, and the schema editor that writes it.
        install_connection_hooks()
        # Builds the generator when the settings are valid, so the first request does not pay
        # for it; invalid settings are the checks' to report, never raised from here.
        runtime.configure(settings_errors, claim=claims_eagerly(sys.argv))
