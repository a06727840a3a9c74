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
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
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
    # Its own test command: "pytest", "runtests.py" (django-simple-history's, through a
    # wrapper of ours) or "manage.py" (the test project's ``manage.py test``).
    runner: str
    # The short form: the test modules where a primary key shows (labels or pytest paths).
    short: tuple[str, ...]
    # What fails only with the switch because the test itself hard-codes a key.
    rules: tuple[Rule, ...] = ()
    # What its test settings and tests import besides the app (installed beside it).
    needs: tuple[str, ...] = ()
    # Options of its own test configuration that its own command line would pass.
    options: tuple[str, ...] = ()
    # What its sdist leaves out of its tests, taken from a clone of its repository at the
    # release's commit (``--git APP=DIR``) and kept with the sdist in the cache.
    git_commit: str = ""
    git_paths: tuple[str, ...] = ()
    # Its test apps whose migrations declare AutoField pks: the switch run migrates them with
    # the AlterField migrations a project that turns it on makes (switch_migrations.py).
    migrated: tuple[str, ...] = ()
    # Where, in its source, its test apps are imported from (for switch_migrations.py).
    path: str = ""
    # The short form makes the test databases from the models (pytest-django's
    # --no-migrations), in both runs: polymorphic's migrations take a minute per database.
    short_without_migrations: bool = False

    @property
    def requirements(self) -> list[str]:
        return [f"{self.package}=={self.version}", *self.needs]

    def command(self, labels: list[str], results: Path, short: bool) -> list[str]:
        if self.runner == "pytest":
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
                # Whole assertion diffs, which the rules read (pytest truncates them).
                "-o",
                "verbosity_assertions=2",
                *self.options,
                *(["--no-migrations"] if short and self.short_without_migrations else []),
                *labels,
            ]
        if self.runner == "manage.py":
            return [
                sys.executable,
                "tests/manage.py",
                "test",
                f"--settings={self.name}_settings",
                "--noinput",
                *self.options,
                # Every test under tests/ (its own CI's command) unless told which.
                *(labels or ["tests"]),
            ]
        return [sys.executable, str(HERE / f"{self.name}_tests.py")]

    def label(self, test_id: str) -> str:
        """The label that runs ``test_id`` alone (a pytest node ID for pytest)."""
        label = django_suite.label_of(test_id)
        if self.runner != "pytest":
            return label
        module = module_of(label)
        rest = label[len(module) + 1 :].replace(".", "::")
        return module.replace(".", "/") + ".py" + (f"::{rest}" if rest else "")


@dataclass(frozen=True)
class ReprRule(Rule):
    """Hard-coded when, besides ``pattern``, the assertion's diff (pytest's ``-`` expected and
    ``+`` actual lines) differs only where django-polymorphic's repr shows the pk: ``id 1`` for
    a field whose class is exactly ``AutoField``, ``id (SnowflakeAutoField/pk) 2520...`` for
    any other (``polymorphic/showfields.py``), so a row out of order still counts as real."""

    def matches(self, test_id: str, failure: str) -> bool:
        if not super().matches(test_id, failure):
            return False
        lines = re.findall(r"^  ([-+]) (.*)$", failure, re.MULTILINE)

        def shown(sign: str) -> list[str]:
            pk = r"\bid (\d+|\(SnowflakeAutoField/pk\)( \d+)?)"
            return [re.sub(pk, "id <pk>", text) for mark, text in lines if mark == sign]

        return bool(lines) and shown("-") == shown("+")


APPS = {
    app.name: app
    for app in [
        App(
            "simple_history",
            "django-simple-history",
            "3.13.0",
            runner="runtests.py",
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
            runner="pytest",
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
        App(
            "polymorphic",
            "django-polymorphic",
            "4.11.3",
            runner="pytest",
            needs=("django-test-migrations",),
            # Its default (pyproject.toml's addopts) leaves out the integration examples; the
            # browser tests need a Playwright browser this run does not install.
            options=("-m", "not integration and not ui"),
            migrated=(
                "tests",
                "deletion",
                "views",
                "integrations",
                "drf_example",
                "type_hints_fk",
                "type_hints_m2m",
                "type_hints_managers",
                "type_hints_one2one",
            ),
            path="src",
            short_without_migrations=True,
            rules=(
                ReprRule(
                    "AutoField's repr",
                    "compares a model's repr, which shows a pk as 'id 1' when its class is "
                    "exactly AutoField and as 'id (SnowflakeAutoField/pk) 2520...' otherwise, "
                    "and nothing else differs",
                    r"^AssertionError: assert .*==",
                ),
                Rule(
                    "literal pk in a lookup",
                    "gets the object it created first by pk=1",
                    r"^[\w.]+\.DoesNotExist: ProxyBase matching query does not exist\.$",
                    tests=r"\.test_proxy_get_real_instance_class$",
                ),
                Rule(
                    "two tables' keys meeting",
                    "joins two tables on their pks (extra(where=['a.id = b.id'])), which meet "
                    "only where two sequences both start at 1",
                    r"^IndexError: list index out of range$",
                    tests=r"\.test_extra_method$",
                ),
            ),
            # Its sdist has no tests: the tag v4.11.3's, with the manage.py they look for.
            git_commit="866c93fc9c62be0d1bce31ee832b1772ebb7d906",
            git_paths=("manage.py", "src/polymorphic/tests"),
            # Its ORM, admin, formset, serialization and utility tests; the deletion and
            # migration tests (about 280 s of its 360 s on SQLite) only in the long form.
            short=tuple(
                f"src/polymorphic/tests/{module}.py"
                for module in (
                    "test_orm",
                    "test_admin",
                    "test_base",
                    "test_contrib",
                    "test_formsets",
                    "test_inheritance",
                    "test_multidb",
                    "test_query_translate",
                    "test_regression",
                    "test_serialization",
                    "test_signals",
                    "test_templatetags",
                    "test_utils",
                    "other/test_cross_apps",
                    "errata/test_errata",
                )
            ),
        ),
        App(
            "reversion",
            "django-reversion",
            "6.4.0",
            runner="manage.py",
            migrated=("test_app",),
            rules=(
                Rule(
                    "literal pk in a serialization",
                    "compares a version's serialized data with 'pk': 1",
                    r"^-   'pk': \d{15,}}\]\n\+   'pk': \d{1,4}}\]$",
                    tests=r"\.NaturalKeyTest\.testNaturalKeyInline$",
                ),
            ),
            path="tests",
            # The whole suite: 158 tests in a few seconds.
            short=("tests",),
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


def source_dir(app: App, git: Path | None) -> Path | None:
    """The app's sdist, with what ``app.git_paths`` adds from ``git`` (a clone of its
    repository) the first time; None when those are needed and neither cached nor given."""
    root = django_suite.cache_root().parent / "app-tests"
    source = django_suite.unpacked_sdist(
        app.package, app.version, root / f"{app.name}-{app.version}"
    )
    done = source / ".git-paths"
    if not app.git_paths or done.exists():
        return source
    if git is None:
        return None
    print(f"Adding {', '.join(app.git_paths)} from {git} at {app.git_commit}", flush=True)
    archive = subprocess.run(
        ["git", "-C", str(git), "archive", "--format=tar", app.git_commit, *app.git_paths],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        # The "data" filter refuses links and paths out of the folder (3.11.4+).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(source, **safe)  # type: ignore[arg-type]
    done.touch()
    return source


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


def switch_migrations(app: App, source: Path, out: Path, env: dict[str, str]) -> dict[str, str]:
    """What makes the switch run migrate ``app.migrated`` with the migrations a project makes
    when it turns the switch on (``makemigrations``: an AlterField of each pk), written once
    per run into a copy of their migrations, never into the app's source."""
    folder = out / f"{app.name}-migrations"
    overlay_env = {
        "SNOWFLAKE_APP_MIGRATIONS": str(folder),
        "SNOWFLAKE_APP_MIGRATED": " ".join(app.migrated),
    }
    if not (folder / "done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        helper_env = {
            **env,
            **overlay_env,
            "SNOWFLAKE_APP_DB": "sqlite",
            "DJANGO_SETTINGS_MODULE": f"{app.name}_settings",
            "PYTHONPATH": os.pathsep.join([str(source / app.path), env["PYTHONPATH"]]),
        }
        subprocess.run(
            [sys.executable, str(HERE / "switch_migrations.py")],
            cwd=source,
            env=helper_env,
            check=True,
        )
        (folder / "done").touch()
    return overlay_env


def run_app(
    app: App,
    source: Path,
    db: str,
    field: str,
    labels: list[str],
    out: Path,
    short: bool,
    suffix: str = "",
) -> Run:
    results, log = django_suite.fresh_outputs(out, f"{app.name}-{db}-{field}{suffix}")
    env = {
        **os.environ,
        "SNOWFLAKE_APP_DB": db,
        "SNOWFLAKE_APP_FIELD": field,
        "SNOWFLAKE_APP_LABELS": " ".join(labels) if app.runner == "runtests.py" else "",
        "SNOWFLAKE_SUITE_RESULTS": str(results),
        # Its test apps too: its tests' subprocesses (polymorphic's manage.py dumpdata) import
        # them, as where its developers install it from its source.
        "PYTHONPATH": os.pathsep.join(
            filter(
                None,
                [
                    str(HERE),
                    str(django_suite.HERE),
                    str(source / app.path) if app.path else "",
                    os.environ.get("PYTHONPATH"),
                ],
            )
        ),
    }
    if field == "snowflake" and app.migrated and not (short and app.short_without_migrations):
        env |= switch_migrations(app, source, out, env)
    command = app.command([] if app.runner == "runtests.py" else labels, results, short)
    print(f"--- {app.name} {app.version}, {db}, {field}", flush=True)
    xml = results.with_suffix(".xml")

    def outcomes() -> dict[str, dict[str, str]]:
        if app.runner == "pytest":
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


def confirm(
    app: App, source: Path, db: str, differences: list[Difference], out: Path, short: bool
) -> None:
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
        field: run_app(app, source, db, field, labels, out, short, suffix="-confirm")
        for field in FIELDS
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
    parser.add_argument(
        "--git",
        action="append",
        default=[],
        metavar="APP=DIR",
        help="a clone of APP's repository, for the tests its sdist leaves out (polymorphic's); "
        "needed once, they are kept in the cache",
    )
    options = parser.parse_args(argv)
    clones = dict(item.split("=", 1) for item in options.git)
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
    missing = []
    for name in options.app.split(","):
        app = APPS[name]
        check_installed(app)
        source = source_dir(app, Path(clones[name]) if name in clones else None)
        if source is None:
            # No registry has them: the run says so, and goes on with the other apps.
            missing.append(app)
            print(
                f"SKIPPED {app.package} {app.version}: its sdist has no tests, and they are not "
                f"in the cache yet: python -m tests.app_suites --app {name} --git {name}=DIR, "
                f"DIR a clone of its repository holding {app.git_commit}",
                flush=True,
            )
            continue
        labels = list(app.short) if options.short else []
        print(f"{app.package} {app.version}'s tests from {source}; logs in {out}", flush=True)
        for db in options.db.split(","):
            runs = {
                field: run_app(app, source, db, field, labels, out, options.short)
                for field in FIELDS
            }
            broken += django_suite.without_results(runs.values(), f"{app.name}/")
            base, switched = runs["default"], runs["snowflake"]
            differences = compare(app, base, switched)
            confirm(app, source, db, differences, out, options.short)
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
        + "".join(f"; {app.package}'s suite SKIPPED (no tests)" for app in missing)
    )
    return 1 if kinds["real"] or broken else 0
