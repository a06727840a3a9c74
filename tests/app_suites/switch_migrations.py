"""The migrations a project makes when it turns the switch on, for a third-party app's test
apps whose migrations declare ``AutoField`` pks: run by ``tests.app_suites`` under the app's
settings with the overlay, it copies each test app's migrations into
``$SNOWFLAKE_APP_MIGRATIONS/switch_migrations/<label>`` (where the overlay's
``MIGRATION_MODULES`` points) and runs ``makemigrations`` there, which adds an ``AlterField``
of each pk to ``SnowflakeAutoField``. The app's own source is never written to."""

import os
import shutil
from importlib import import_module
from pathlib import Path

import django
from django.apps import apps
from django.core.management import call_command

# Before the settings put its folder on sys.path, where an import would cache it as missing.
package = Path(os.environ["SNOWFLAKE_APP_MIGRATIONS"]) / "switch_migrations"
package.mkdir(parents=True)
(package / "__init__.py").touch()
django.setup()
labels = os.environ["SNOWFLAKE_APP_MIGRATED"].split()
for label in labels:
    original = import_module(f"{apps.get_app_config(label).name}.migrations")
    shutil.copytree(
        Path(original.__file__).parent,
        package / label,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
call_command("makemigrations", *labels, interactive=False, verbosity=1)
