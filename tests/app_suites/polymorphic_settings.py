"""django-polymorphic's own test settings (pytest's ``--ds``) with the overlay."""

import os

from overlay import apply  # type: ignore[import-not-found]  # on PYTHONPATH in the run
from polymorphic.tests.settings import *  # noqa: F403  # the app's own settings

apply(globals())
# Its tests run management commands in a subprocess on the test database, which they name in
# PYTEST_DB_NAME (polymorphic/tests/utils.py), as its own settings read it.
if os.environ.get("PYTEST_DB_NAME"):
    DATABASES["default"]["NAME"] = os.environ["PYTEST_DB_NAME"]  # noqa: F405
