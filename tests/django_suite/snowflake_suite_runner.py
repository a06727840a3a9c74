"""A DiscoverRunner whose result also writes every test's outcome to a JSON file.

Used by Django's runtests.py through ``snowflake_suite_settings``, and by the third-party
apps' suites of ``tests.app_suites``. Under ``--parallel`` the workers' events are replayed on
this result in the parent process, so one file holds all.
"""

import json
import os
import unittest

from django.test.runner import DiscoverRunner

FAILED = ("failure", "error", "unexpected_success")


class RecordingResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def _record(self, test, outcome, detail=""):
        key = test.id()
        previous = self.outcomes.get(key)
        # A failing subtest, or a tearDown error after a failure, keeps the test failed.
        if previous and previous["outcome"] in FAILED and outcome not in FAILED:
            return
        if previous and previous["outcome"] in FAILED:
            detail = previous["detail"] + "\n" + detail
        if len(detail) > 6000:
            # The exception's first line, then what ends it (assertNumQueries lists every query).
            detail = detail[:3000] + "\n[...]\n" + detail[-3000:]
        self.outcomes[key] = {"outcome": outcome, "detail": detail}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "success")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "failure" if issubclass(err[0], test.failureException) else "error"
            text = f"[subtest {subtest._subDescription()}]\n"
            self._record(test, kind, text + self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "expected_failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "unexpected_success", "unexpected success")


class RecordingRunner(DiscoverRunner):
    def get_resultclass(self):
        base = super().get_resultclass()
        if base is None:
            return RecordingResult
        return type("Recording" + base.__name__, (RecordingResult, base), {})

    def run_suite(self, suite, **kwargs):
        result = super().run_suite(suite, **kwargs)
        path = os.environ.get("SNOWFLAKE_SUITE_RESULTS")
        if path:
            # A command that runs several suites in one process (django-simple-history's
            # runtests.py) adds each to the file; the driver removes it before a run.
            outcomes = {}
            if os.path.exists(path):
                with open(path, encoding="utf-8") as stream:
                    outcomes = json.load(stream)
            with open(path, "w", encoding="utf-8") as stream:
                json.dump(outcomes | result.outcomes, stream)
        return result
