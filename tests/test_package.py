"""What importing the package gives besides its API: the version of the distribution."""

from __future__ import annotations

import tomllib
from pathlib import Path

import django_snowflake

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_version_is_the_distributions() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert django_snowflake.__version__ == project["version"]
