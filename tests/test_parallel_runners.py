"""The recommended test settings under the test runners users run: Django's forking
``manage.py test --parallel``, pytest-xdist and plain runs (issue 12 item 2).

Django's parallel runner forks its workers from a process whose generator already exists
(and has issued IDs); each worker runs on its own clone of the test database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import ROOT
from harness.processes import run_python

from .user_suite import report, run_user_suite

pytestmark = pytest.mark.slow

SETTINGS = """
    import os

    from tests.settings import get_db_conf

    SECRET_KEY = "not-secret"
    USE_TZ = True
    INSTALLED_APPS = [
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "django_snowflake",
        "shop",
    ]
    DATABASES = {"default": get_db_conf()}
    DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"
    # The recommended test settings (docs: Testing).
    SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}
    TEST_RUNNER = "shop.runner.Runner"
"""

MODELS = """
    from django.db import models

    from django_snowflake.models import SnowflakeModel


    class Order(SnowflakeModel):
        number = models.IntegerField()


    class Note(models.Model):  # the project-wide switch: SnowflakeAutoField
        text = models.TextField()
"""

RUNNER = """
    from django.test.runner import DiscoverRunner

    from django_snowflake import generate


    class Runner(DiscoverRunner):
        def setup_databases(self, **kwargs):
            # The parent issues IDs before it forks the workers, as fixtures and data
            # migrations do.
            generate()
            return super().setup_databases(**kwargs)
"""

TESTS = """
    import os
    import time

    from django.test import SimpleTestCase, TestCase

    from django_snowflake import decode, generate

    from .models import Note, Order


    class Created:
        def test_orders(self):
            orders = [Order.objects.create(number=n) for n in range(50)]
            assert Order.objects.count() == 50
            for order in orders:
                parts = decode(order.pk)
                assert parts.worker_id == 0
                assert abs(parts.timestamp.timestamp() - time.time()) < 60
            print(f"\\nWORKER {os.getpid()}", flush=True)

        def test_notes(self):
            notes = [Note.objects.create(text=str(n)) for n in range(20)]
            assert len({note.pk for note in notes}) == 20
            print(f"\\nWORKER {os.getpid()}", flush=True)


    class A(Created, TestCase):
        pass


    class B(Created, TestCase):
        pass


    class C(Created, TestCase):
        pass


    class D(Created, TestCase):
        pass


    class WithoutDatabase(SimpleTestCase):
        def test_instance_has_a_key(self):
            assert Order(number=1).pk is not None
            assert decode(generate()).worker_id == 0
"""


def _project(tmp_path: Path) -> Path:
    files = {
        "manage.py": """
            import os
            import sys

            from django.core.management import execute_from_command_line

            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project_settings")
            execute_from_command_line(sys.argv)
        """,
        "project_settings.py": SETTINGS,
        "shop/__init__.py": "",
        "shop/models.py": MODELS,
        "shop/runner.py": RUNNER,
        "shop/tests.py": TESTS,
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


@pytest.mark.parametrize("parallel", ["2", "1"])
def test_manage_py_test(tmp_path: Path, parallel: str) -> None:
    project = _project(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)]),
        # A test database of its own, named after this run.
        "SNOWFLAKE_TEST_RUN": f"runner{os.getpid()}x{parallel}",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("SNOWFLAKE_TEST_SETTINGS", None)
    returncode, output = run_python(
        "manage.py", "test", "shop", "--parallel", parallel, "-v", "2", cwd=project, env=env
    )
    assert returncode == 0, output[-5000:]
    assert "Ran 9 tests" in output and "OK" in output
    workers = {line for line in output.splitlines() if line.startswith("WORKER ")}
    if parallel == "2":
        assert "Cloning test database" in output
        assert len(workers) == 2, output[-3000:]


def test_pytest_xdist(tmp_path: Path) -> None:
    # Each xdist worker is a fresh process with its own test database.
    result = run_user_suite(
        tmp_path,
        """
        import os

        import pytest

        from django_snowflake import decode, generate
        from tests.testapp.models import Customer


        @pytest.mark.parametrize("n", range(8))
        @pytest.mark.django_db
        def test_orders(n):
            orders = [Customer.objects.create(name=str(i)) for i in range(20)]
            assert {decode(o.pk).worker_id for o in orders} == {0}
            print(f"WORKER {os.getpid()}")
        """,
        "-n",
        "2",
        "-s",
    )
    assert result.returncode == 0, report(result)
    assert "8 passed" in result.stdout


def test_a_forked_production_process_still_refuses() -> None:
    # Outside Django's parallel test runner, a fork must not share a static worker ID.
    code = textwrap.dedent(
        """
        import os
        import django
        django.setup()
        import django_snowflake
        from django_snowflake.exceptions import WorkerLeaseLost
        django_snowflake.generate()
        pid = os.fork()
        if pid == 0:
            try:
                django_snowflake.generate()
            except WorkerLeaseLost as exc:
                print("REFUSED", exc, flush=True)
                os._exit(0)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        raise SystemExit(os.waitstatus_to_exitcode(status))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "REFUSED" in result.stdout and "is a fork of it" in result.stdout
