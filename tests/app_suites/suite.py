"""Third-party apps' own test suites as judges of ``SnowflakeAutoField``.

Runs each app's own test command (django-simple-history's ``runtests.py``, django-guardian's
``pytest``) on its source at a release, twice: with the app's own ``DEFAULT_AUTO_FIELD``, and
with the switch a project turns on (``DEFAULT_AUTO_FIELD = SnowflakeAutoField`` and
``django_snowflake`` installed, through the settings overlay of ``overlay.py``), on SQLite and
PostgreSQL, and prints every test that passes only without the switch, classified as
``tests.django_suite`` does: ``hard-coded`` (the test hard-codes a small key or stores a key in
a 32-bit column) or ``real``.

Each app's source comes from its sdist on PyPI (which ships its tests), downloaded once per
version into ``$SNOWFLAKE_SUITE_CACHE/../app-tests`` (by default
``~/.cache/django-snowflake/app-tests``). Usage::

    python -m tests.app_suites                                    # every app, both databases
    python -m tests.app_suites --app simple_history --db postgresql
    python -m tests.app_suites --short                            # the short form run by CI
    pip install $(python -m tests.app_suites --requirements)      # what they need installed

The exit status is 1 when a real difference (or a run without results) was found, else 0.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from tests.django_suite import suite as django_suite
from tests.django_suite.suite import FAILED, Difference, Rule, Run

HERE = Path(__file__).resolve().parent
FIELDS = ("default", "snowflake")
EVERY_TEST = " (every test)"


@dataclass(frozen=True)
class App:
    """A third-party app whose own suite is run, at the release pinned here."""

    name: str
    package: str
    version: str
    # pytest runs it (else the app's runtests.py, through a wrapper of ours).
    pytest: bool
    # The short form: the test modules where a primary key shows (labels or pytest paths).
    short: tuple[str, ...]
    # What fails only with the switch because the test itself hard-codes a key.
    rules: tuple[Rule, ...] = ()
    # What its test settings import besides the app (installed beside it).
    needs: tuple[str, ...] = ()

    @property
    def requirements(self) -> list[str]:
        return [f"{self.package}=={self.version}", *self.needs]

    def command(self, labels: list[str], results: Path) -> list[str]:
        if self.pytest:
            return [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--tb=native",
                f"--junitxml={results.with_suffix('.xml')}",
                f"--ds={self.name}_settings",
                *labels,
            ]
        return [sys.executable, str(HERE / f"{self.name}_tests.py")]

    def label(self, test_id: str) -> str:
        """The label that runs ``test_id`` alone (a pytest node ID for pytest)."""
        label = django_suite.label_of(test_id)
        if not self.pytest:
            return label
        module = module_of(label)
        rest = label[len(module) + 1 :].replace(".", "::")
        return module.replace(".", "/") + ".py" + (f"::{rest}" if rest else "")


APPS = {
    app.name: app
    for app in [
        App(
            "simple_history",
            "django-simple-history",
            "3.13.0",
            pytest=False,
            rules=(
                Rule(
                    "literal pk in a filter",
                    "filters the history by history_relation=2, the pk AutoField gives the "
                    "test's second Street",
                    r"^AssertionError: 0 != 2$",
                    tests=r"\.RelatedNameTest\.test_deletion$",
                ),
            ),
            short=(
                "simple_history.tests.tests.test_models",
                "simple_history.tests.tests.test_manager",
                "simple_history.tests.tests.test_utils",
            ),
        ),
        App(
            "guardian",
            "django-guardian",
            "3.5.2",
            pytest=True,
            needs=("django-environ",),
            short=(
                "guardian/testapp/tests/test_core.py",
                "guardian/testapp/tests/test_shortcuts.py",
                "guardian/testapp/tests/test_managers.py",
                "guardian/testapp/tests/test_utils.py",
                "guardian/testapp/tests/test_custompkmodel.py",
                "guardian/testapp/tests/test_orphans.py",
            ),
        ),
    ]
}


def check_installed(app: App) -> None:
    """The app's tests run from its source, but read its installed distribution's metadata
    (django-simple-history's ``__version__``) and dependencies: the same release must be
    installed (the ``appsuites`` list in docs/compatibility.rst)."""
    try:
        installed = metadata.version(app.package)
    except metadata.PackageNotFoundError:
        installed = None
    if installed != app.version:
        raise SystemExit(
            f"{app.package}=={app.version} must be installed to run its suite "
            f"(found {installed}): pip install {' '.join(app.requirements)}"
        )


def source_dir(app: App) -> Path:
    root = django_suite.cache_root().parent / "app-tests"
    return django_suite.unpacked_sdist(app.package, app.version, root / f"{app.name}-{app.version}")


def junit_outcomes(path: Path) -> dict[str, dict[str, str]]:
    """pytest's JUnit XML as the outcomes the recording runner writes."""
    outcomes = {}
    for case in ElementTree.parse(path).iter("testcase"):
        test_id = f"{case.get('classname')}.{case.get('name')}"
        outcome, detail = "success", ""
        for child in case:
            kind = {"failure": "failure", "error": "error", "skipped": "skip"}.get(child.tag)
            if kind:
                outcome = kind
                detail = (child.text or child.get("message") or "")[-6000:]
                if kind != "skip":
                    break
        outcomes[test_id] = {"outcome": outcome, "detail": detail}
    return outcomes


def run_app(
    app: App, source: Path, db: str, field: str, labels: list[str], out: Path, suffix: str = ""
) -> Run:
    results = out / f"{app.name}-{db}-{field}{suffix}.json"
    log = out / f"{app.name}-{db}-{field}{suffix}.log"
    results.unlink(missing_ok=True)
    results.with_suffix(".xml").unlink(missing_ok=True)
    env = {
        **os.environ,
        "SNOWFLAKE_APP_DB": db,
        "SNOWFLAKE_APP_FIELD": field,
        "SNOWFLAKE_APP_LABELS": "" if app.pytest else " ".join(labels),
        "SNOWFLAKE_SUITE_RESULTS": str(results),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(HERE), str(django_suite.HERE), os.environ.get("PYTHONPATH")])
        ),
    }
    command = app.command(labels if app.pytest else [], results)
    print(f"--- {app.name} {app.version}, {db}, {field}", flush=True)
    xml = results.with_suffix(".xml")

    def outcomes() -> dict[str, dict[str, str]]:
        if app.pytest:
            return junit_outcomes(xml) if xml.exists() else {}
        return django_suite.read_outcomes(results)

    return django_suite.timed_run(db, field, command, source, env, log, outcomes)


def module_of(test_id: str) -> str:
    """The test's module: its dotted id up to the last lower-case name before the test's."""
    parts = django_suite.label_of(test_id).split(".")
    for end in range(len(parts) - 1, 0, -1):
        if parts[end - 1].islower():
            return ".".join(parts[:end])
    return parts[0]


def classify(app: App, differences: list[Difference]) -> None:
    for difference in differences:
        for rule in app.rules:
            if rule.matches(difference.test_id, difference.summary):
                difference.kind, difference.rule = "hard-coded", rule


def compare(app: App, base: Run, switched: Run) -> list[Difference]:
    if base.outcomes and not switched.outcomes:
        # No test ran with the switch (its test databases could not be made): the whole suite.
        first = re.findall(r"^[\w.]+(?:Error|Exception): .*$", switched.tail, re.MULTILINE)
        summary = first[-1] if first else switched.tail.strip()[-300:]
        return [Difference(switched.db, f"{app.name}{EVERY_TEST}", "real", None, summary)]
    differences = django_suite.compare(base, switched, None)
    classify(app, differences)
    return differences


def confirm(app: App, source: Path, db: str, differences: list[Difference], out: Path) -> None:
    """Run each real difference again alone, both ways: one that passes with the switch this
    time, or fails with the app's default too, was the machine (guardian's timing tests under
    load) and becomes ``flaky``, which does not fail the run."""
    real = [
        d
        for d in differences
        if d.kind == "real"
        and not d.test_id.endswith(EVERY_TEST)
        and django_suite.INSIDE_PACKAGE_NOTE not in d.summary
    ]
    if not real:
        return
    labels = sorted({app.label(d.test_id) for d in real})
    print(f"    confirming {len(real)} real differences by running them again", flush=True)
    again = {
        field: run_app(app, source, db, field, labels, out, suffix="-confirm") for field in FIELDS
    }
    for difference in real:
        label = django_suite.label_of(difference.test_id)
        # A class-level error ("setUpClass (...)") reran as its class's tests.
        ran = {
            field: [
                v["outcome"] in FAILED
                for k, v in again[field].outcomes.items()
                if k == label or k.startswith(label + ".")
            ]
            for field in FIELDS
        }
        if (ran["snowflake"] and not any(ran["snowflake"])) or any(ran["default"]):
            difference.kind = "flaky"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.app_suites", description=__doc__)
    parser.add_argument("--app", default=",".join(APPS), help=", ".join(APPS))
    parser.add_argument(
        "--db", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql, mariadb"
    )
    parser.add_argument("--short", action="store_true", help="the short form run by .ci/run")
    parser.add_argument("--out", type=Path, help="where the logs and results go (default: temp)")
    parser.add_argument("--report", type=Path, help="write the tables and differences as JSON")
    parser.add_argument(
        "--requirements",
        action="store_true",
        help="print what pip must install to run the apps' suites, and run nothing",
    )
    options = parser.parse_args(argv)
    if options.requirements:
        print(*(r for name in options.app.split(",") for r in APPS[name].requirements))
        return 0

    import django

    out = options.out or Path(tempfile.mkdtemp(prefix="app-suites-"))
    out.mkdir(parents=True, exist_ok=True)
    django_suite.ensure_tblib()
    report: dict[str, object] = {"django": django.__version__, "apps": {}}
    all_differences: list[Difference] = []
    broken = []
    for name in options.app.split(","):
        app = APPS[name]
        check_installed(app)
        source = source_dir(app)
        labels = list(app.short) if options.short else []
        print(f"{app.package} {app.version}'s tests from {source}; logs in {out}", flush=True)
        for db in options.db.split(","):
            runs = {field: run_app(app, source, db, field, labels, out) for field in FIELDS}
            for run in runs.values():
                if not run.outcomes:
                    broken.append(run)
                    print(f"No results from {app.name}/{db}/{run.field}; its log ends:\n{run.tail}")
            base, switched = runs["default"], runs["snowflake"]
            differences = compare(app, base, switched)
            confirm(app, source, db, differences, out)
            all_differences += differences
            modules = sorted({module_of(k) for k in {*base.outcomes, *switched.outcomes}})
            rows = django_suite.table(base, switched, differences, modules, before="default")
            print(f"\n{app.name}, {db}: tests that fail only with SnowflakeAutoField\n")
            print(rows)
            django_suite.print_differences(f"{app.name}, {db}", differences)
            report["apps"].setdefault(f"{app.name} {app.version}", {})[db] = {  # type: ignore[attr-defined]
                "runs": {field: django_suite.run_record(run) for field, run in runs.items()},
                "differences": [django_suite.difference_record(d) for d in differences],
                "table": rows,
            }
    if options.report:
        options.report.write_text(json.dumps(report, indent=1, default=list), encoding="utf-8")
    if not options.out:
        shutil.rmtree(out, ignore_errors=True)
    kinds = collections.Counter(d.kind for d in all_differences)
    print(
        f"\nApp suites: {kinds['real']} real differences, {kinds['hard-coded']} hard-coded, "
        f"{kinds['flaky']} flaky, {len(broken)} broken runs"
    )
    return 1 if kinds["real"] or broken else 0
