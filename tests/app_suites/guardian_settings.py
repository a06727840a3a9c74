"""django-guardian's own test settings (pytest's ``--ds``) with the overlay."""

from guardian.testapp.testsettings import *  # noqa: F403  # the app's own settings
from overlay import apply  # type: ignore[import-not-found]  # on PYTHONPATH in the run

apply(globals())
