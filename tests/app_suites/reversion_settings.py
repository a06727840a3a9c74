"""django-reversion's own test settings (``tests/manage.py test --settings``) with the overlay,
and the runner that records each test's outcome."""

from overlay import apply  # type: ignore[import-not-found]  # on PYTHONPATH in the run
from test_project.settings import *  # noqa: F403  # the app's own settings

TEST_RUNNER = "snowflake_suite_runner.RecordingRunner"

apply(globals())
