"""The package's imports point one way: the rows of docs/architecture.rst, read from the page.

A module may import only modules on rows below its own, counting imports inside functions
(so there is no import cycle, however late an import runs), and the bottom five rows import
nothing from Django.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_snowflake"
PAGE = ROOT / "docs" / "architecture.rst"
# Names the package's __init__ defines: ``from . import generate`` imports __init__.
PUBLIC = {"decode", "generate", "generate_many", "get_generator", "max_id_for", "min_id_for"}
WITHOUT_DJANGO = 5
# Imports that point up, each with its reason; none today. An entry fails the test once its
# import is gone, or no longer points up, so that it goes with it.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def rows() -> list[list[str]]:
    """The module rows of the page's diagram, top first."""
    after = PAGE.read_text().split(".. _module-rows:", 1)[1]
    lines = after.split(".. code-block:: text", 1)[1].splitlines()[1:]
    found = []
    for line in lines:
        if line and not line.startswith(" "):
            break  # the end of the indented block
        names = line.split(" ..", 1)[0].strip()
        if names and names != "▼":
            found.append([name.strip() for name in names.split(",")])
    return found


def row_of(module: str, table: list[list[str]]) -> int:
    """The row of ``module`` (``management.commands.show_worker`` is on the row of
    ``management.commands``); counted from the bottom, so lower rows have smaller numbers."""
    # The row naming the module itself, else the row of its longest named parent
    # (``vendors.mysql`` has a row of its own below the package ``vendors``).
    named = [
        (len(name), len(table) - index)
        for index, row in enumerate(table)
        for name in row
        if module == name or module.startswith(name + ".")
    ]
    if named:
        return max(named)[1]
    raise AssertionError(f"django_snowflake.{module} is on no row of {PAGE.name}")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if "migrations" in parts:
            continue
        if parts[-1] == "__init__" and len(parts) > 1:
            if all(isinstance(node, ast.Expr) for node in ast.parse(path.read_text()).body):
                continue  # a docstring at most: nothing to place
            parts = parts[:-1]  # a subpackage's own code (vendors: the lookup) is its name's
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path) -> list[tuple[str, int]]:
    """(module of the package, line) for every import of the package in ``path``."""
    if module == "__init__":
        package = []
    elif path.name == "__init__.py":
        package = module.split(".")  # relative imports of a package start at the package
    else:
        package = module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            if isinstance(node, ast.Import):
                found += [
                    (alias.name.removeprefix("django_snowflake."), node.lineno)
                    for alias in node.names
                    if alias.name.startswith("django_snowflake.")
                ]
            continue
        if node.level:
            base = package[: len(package) - node.level + 1]
        elif (node.module or "").split(".")[0] == "django_snowflake":
            base = []
        else:
            continue
        target = [*base, *(node.module or "").split(".")]
        target = [part for part in target if part and part != "django_snowflake"]
        if node.module and node.module != "django_snowflake":
            found.append((".".join(target) or "__init__", node.lineno))
            continue
        for alias in node.names:  # from . import conf, runtime / from . import generate
            name = ".".join([*target, alias.name])
            found.append(("__init__" if alias.name in PUBLIC else name, node.lineno))
    return found


def django_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        lines += [node.lineno for name in names if re.match(r"(django|rest_framework)\b", name)]
    return lines


def test_the_page_names_every_module_once() -> None:
    table = rows()
    names = [name for row in table for name in row]
    assert len(names) == len(set(names)), names
    for module in modules():
        row_of(module, table)


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_point_down(module: str) -> None:
    table = rows()
    mine = row_of(module, table)
    upward = {
        target
        for target, _line in imports(module, modules()[module])
        if row_of(target, table) >= mine
    }
    known = {target for importer, target in KNOWN_UPWARD if importer == module}
    assert upward == known, f"django_snowflake.{module} imports a module on its row or above"


@pytest.mark.parametrize("module", [name for row in rows()[-WITHOUT_DJANGO:] for name in row])
def test_the_algorithm_imports_no_django(module: str) -> None:
    assert django_imports(modules()[module]) == []


def test_a_module_that_imports_upward_is_found(tmp_path: Path) -> None:
    # The checker itself: conf importing runtime (the cycle the page rules out) is caught.
    source = tmp_path / "conf.py"
    source.write_text("def reset():\n    from . import runtime\n")
    table = rows()
    assert [row_of(t, table) >= row_of("conf", table) for t, _ in imports("conf", source)] == [True]
