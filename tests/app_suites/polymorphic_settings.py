"""django-polymorphic's own test settings (pytest's ``--ds``) with the overlay."""

from overlay import apply  # type: ignore[import-not-found]  # on PYTHONPATH in the run
from polymorphic.tests.settings import *  # noqa: F403  # the app's own settings

apply(globals())
