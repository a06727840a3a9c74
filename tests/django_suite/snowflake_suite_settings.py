"""Settings for Django's own runtests.py, run by ``python -m tests.django_suite``.

Django's ``test_sqlite`` settings (found on runtests.py's own path) plus this package: the
app installed, the recommended test settings (docs/testing.rst), the database and the primary
key field chosen by the driver through the environment, and a test runner that records each
test's outcome for the driver.
"""

import os

from suite_servers import server
from test_sqlite import *  # noqa: F403  # Django's example settings are the base

import __main__

# runtests.py replaces INSTALLED_APPS with its ALWAYS_INSTALLED_APPS list when it reads the
# settings (after this module is imported, in the same process): our app must be in that
# list for its migrations (PostgreSQL's key function) and connection hooks (SQLite's) to
# exist. It is installed in both runs, so the AutoField run differs from the switched one by
# DEFAULT_AUTO_FIELD alone.
_always = getattr(__main__, "ALWAYS_INSTALLED_APPS", None)
if _always is not None and "django_snowflake" not in _always:
    _always.append("django_snowflake")

FIELDS = {
    "autofield": "django.db.models.AutoField",
    "snowflake": "django_snowflake.fields.SnowflakeAutoField",
    # The reference: Django's own switch, to tell tests that hard-code AutoField.
    "bigautofield": "django.db.models.BigAutoField",
}
DEFAULT_AUTO_FIELD = FIELDS[os.environ.get("SNOWFLAKE_SUITE_FIELD", "autofield")]

# The recommended test settings (docs/testing.rst).
SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}

# On a server, the databases are named per run so concurrent runs (and their --parallel
# clones) never share one.
_name = f"djsuite_{os.getpid()}"
if (_default := server(os.environ.get("SNOWFLAKE_SUITE_DB", "sqlite"), _name)) is not None:
    DATABASES = {"default": _default, "other": {**_default, "NAME": f"{_name}_other"}}

TEST_RUNNER = "snowflake_suite_runner.RecordingRunner"
