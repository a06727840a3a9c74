"""Dependencies inside ``django_snowflake`` point one way: no import cycle, counting the
imports inside functions (a late import hides a cycle from Python, not from a reader).

Imports under ``if TYPE_CHECKING:`` are left out: they never run. ``from . import name``
depends on the submodule ``name`` when there is one, else on the package's ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_snowflake"


def module_name(path: Path) -> str:
    parts = [PACKAGE.name, *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                if node.level:
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                # ``from . import runtime`` imports a submodule; ``from . import generate``
                # a name of the package itself.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in paths and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(import_graph()) == []


def test_conf_depends_on_the_layout_only() -> None:
    assert import_graph()["django_snowflake.conf"] == {"django_snowflake.layout"}


def test_runtime_does_not_depend_on_checks_nor_models() -> None:
    graph = import_graph()
    reached, todo = set(), ["django_snowflake.runtime"]
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert {"django_snowflake.checks", "django_snowflake.models"} & reached == set()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # A late import counts; one under TYPE_CHECKING does not.
        ("def f():\n    from . import b\n", [["pkg.a", "pkg.b"]]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n", []),
    ],
)
def test_the_cycle_finder_finds_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: list[list[str]]
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(source)
    (package / "b.py").write_text("from .a import x\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", package)
    assert cycles(import_graph()) == expected
