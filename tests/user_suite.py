"""Run a user project's small pytest suite in a fresh interpreter, on this repository's test settings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness import ROOT


def run_user_suite(
    tmp_path: Path, source: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Write ``source`` as ``test_user.py`` under ``tmp_path`` and run pytest on it.

    The suite runs with ``tests.settings`` (the recommended static test settings) in its own
    process, as a project's suite would; the result carries pytest's output.
    """
    path = tmp_path / "test_user.py"
    path.write_text(textwrap.dedent(source))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(path),
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            *args,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def report(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout[-4000:] + result.stderr[-2000:]
