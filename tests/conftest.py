from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def spawn(transactional_db: None) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``tests/worker_process.py`` in a fresh interpreter on the test database.

    Keyword arguments become the process's ``SNOWFLAKE`` setting (the database allocator
    unless they say otherwise). Every process still running at the end is killed.
    """
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str, snowflake: dict[str, Any] | None = None) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "SNOWFLAKE_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
            "SNOWFLAKE_TEST_SETTINGS": json.dumps(snowflake or {}),
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.worker_process", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout:
            process.stdout.close()
