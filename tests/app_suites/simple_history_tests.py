"""django-simple-history's own test command, ``runtests.py [--database=postgres]``, with the
overlay: run in its source folder by ``tests.app_suites``. Its settings come from its
``get_default_settings()``; its two DiscoverRunner runs record each test's outcome."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.getcwd())

import runtests  # django-simple-history's, from its source folder
from django.conf import settings
from overlay import apply
from snowflake_suite_runner import RecordingRunner

DATABASES = {"sqlite": "sqlite3", "postgresql": "postgres", "mariadb": "mariadb"}


class Runner(RecordingRunner):
    def run_tests(self, test_labels, *args, **kwargs):
        # The short form: only the chosen labels under each of runtests.py's two runs.
        wanted = os.environ.get("SNOWFLAKE_APP_LABELS", "").split()
        if wanted:
            test_labels = [w for w in wanted if any(w.startswith(label) for label in test_labels)]
            if not test_labels:
                return 0
        return super().run_tests(test_labels, *args, **kwargs)


database = DATABASES[os.environ.get("SNOWFLAKE_APP_DB", "sqlite")]
settings.configure(**apply(runtests.get_default_settings(database_name=database)))
runtests.DiscoverRunner = Runner
sys.argv = ["runtests.py", f"--database={database}"]
runtests.main()
