from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from django.db import connection, models

from django_snowflake import get_generator
from django_snowflake.generator import SnowflakeGenerator
from harness import ROOT
from harness.processes import reap

__all__ = ["ROOT"]


@pytest.fixture
def workers() -> Iterator[list[Any]]:
    """The worker processes a test starts (objects with ``kill()``), killed at its end if
    still running."""
    started: list[Any] = []
    yield started
    for worker in started:
        worker.kill()


@contextlib.contextmanager
def model_table(model: type[models.Model]) -> Iterator[None]:
    """``model``'s table on the default database for the block, dropped after it whatever
    the block did (a model made inside a test, under ``isolate_apps``)."""
    with connection.schema_editor() as editor:
        editor.create_model(model)
    try:
        yield
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(model)


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[Any]:
    """A 3-node MariaDB Galera cluster of the module's own (tests/test_galera*.py: a test
    there may leave it bootstrapped anew)."""
    from .galera_keys import started_cluster

    yield from started_cluster(pytestconfig)


@pytest.fixture
def spawn(transactional_db: None) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``tests/worker_process.py`` (or ``module``) in a fresh interpreter on the test
    database.

    ``snowflake`` becomes the process's ``SNOWFLAKE`` setting (the database allocator
    unless it says otherwise), ``python`` options go to the interpreter (``["-W", "error"]``),
    ``environ`` adds to or overrides its environment. Every process still running at the end
    is killed.
    """
    processes: list[subprocess.Popen[str]] = []

    def start(
        *args: str,
        snowflake: dict[str, Any] | None = None,
        python: Sequence[str] = (),
        module: str = "tests.worker_process",
        environ: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "SNOWFLAKE_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
            "SNOWFLAKE_TEST_SETTINGS": json.dumps(snowflake or {}),
            **(environ or {}),
        }
        process = subprocess.Popen(
            [sys.executable, *python, "-m", module, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        return process

    yield start
    reap(processes)


@pytest.fixture
def database_generator(settings: Any) -> Iterator[Callable[..., SnowflakeGenerator]]:
    """Switch the process-local generator to the database allocator with these settings."""

    def use(**snowflake: Any) -> SnowflakeGenerator:
        # On SQLite a connection claims the slot as it opens (vendors.sqlite._claim_now): open
        # the test's connection under the old generator, so that the new one claims at its
        # first ID, after the rows a test plants.
        connection.ensure_connection()
        settings.SNOWFLAKE = snowflake
        return get_generator()

    yield use
