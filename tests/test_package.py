"""What the distribution says of itself: its version, and the Pythons and Djangos it supports,
said the same in its metadata, its pin, the CI matrix, tox and the pages a user reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import django_snowflake

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def classified(framework: str) -> list[str]:
    """The versions of ``framework`` the classifiers list, oldest first."""
    prefix = f"{framework} :: "
    versions = [c.removeprefix(prefix) for c in PROJECT["classifiers"] if c.startswith(prefix)]
    return sorted((v for v in versions if re.fullmatch(r"\d+\.\d+", v)), key=Version)


DJANGOS = classified("Framework :: Django")
PYTHONS = classified("Programming Language :: Python")


def test_version_is_the_distributions() -> None:
    assert django_snowflake.__version__ == PROJECT["version"]


def test_the_classifiers_list_the_supported_versions() -> None:
    assert DJANGOS == ["5.2", "6.0", "6.1"]
    assert PYTHONS == ["3.11", "3.12", "3.13"]
    assert PROJECT["requires-python"] == f">={PYTHONS[0]}"


def test_the_django_pin_admits_the_tested_versions_and_their_patch_releases() -> None:
    (pin,) = (Requirement(d) for d in PROJECT["dependencies"] if d.startswith("Django"))
    admitted = pin.specifier
    for version in DJANGOS:
        assert admitted.contains(f"{version}.0") and admitted.contains(f"{version}.99"), version
    major, minor = DJANGOS[-1].split(".")
    assert not admitted.contains(f"{major}.{int(minor) + 1}")  # the next feature release
    major, minor = DJANGOS[0].split(".")
    assert not admitted.contains(f"{major}.{int(minor) - 1}.99")


def test_ci_tests_each_supported_django_and_python() -> None:
    # .ci/run's matrix: one line a Python, its Django and the databases.
    rows = re.findall(r'^\s+"(\d\.\d+) (\d\.\d) [a-z ]+"$', (ROOT / ".ci/run").read_text(), re.M)
    assert sorted({django for _, django in rows}, key=Version) == DJANGOS
    assert sorted({python for python, _ in rows}, key=Version) == PYTHONS


def test_tox_runs_each_supported_django_and_python() -> None:
    tox = (ROOT / "tox.ini").read_text()
    pins = re.findall(r"^\s+django(\d)(\d+): Django>=(\S+),<(\S+)$", tox, re.M)
    assert [f"{major}.{minor}" for major, minor, _, _ in pins] == DJANGOS
    assert all(low == f"{major}.{minor}" for major, minor, low, _ in pins)
    pythons = {
        f"3.{minor}"
        for group in re.findall(r"py\{([\d,]+)\}", tox)
        for minor in [v.removeprefix("3") for v in group.split(",")]
    }
    assert sorted(pythons, key=Version) == PYTHONS


@pytest.mark.parametrize(
    ("page", "line", "djangos", "pythons"),
    [
        ("README.md", "Supports Django ", True, True),
        ("docs/install.rst", "- Django ", True, False),
        ("docs/install.rst", "- Python ", False, True),
        ("docs/changelog.rst", "- Supports Python ", True, True),
    ],
)
def test_the_pages_say_the_supported_versions(
    page: str, line: str, djangos: bool, pythons: bool
) -> None:
    (said,) = re.findall(rf"^{re.escape(line)}.*$", (ROOT / page).read_text(), re.M)
    if djangos:
        assert re.findall(r"(?<![\d.])([4-9]\.\d)(?!\.?\d)", said) == DJANGOS, said
    if pythons:
        # "3.11 to 3.13" or "3.11, 3.12 or 3.13", and maybe "Django 6.x needs Python 3.12".
        named = set(re.findall(r"(?<![\d.])(3\.\d+)(?!\.?\d)", said))
        assert {PYTHONS[0], PYTHONS[-1]} <= named <= set(PYTHONS), said


def test_the_pages_name_the_wheel_that_build_writes() -> None:
    wheel = f"dist/{PROJECT['name'].replace('-', '_')}-{PROJECT['version']}-py3-none-any.whl"
    for page in ("README.md", "docs/install.rst"):
        named = re.findall(r"dist/\S+\.whl", (ROOT / page).read_text())
        assert named == [wheel], page
