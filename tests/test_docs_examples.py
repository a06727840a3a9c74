"""The examples of the docs pages that show code with its output run as doctests, so that
they cannot drift from what the package does (docs/rollback.rst, docs/layouts.rst)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ["rollback.rst", "layouts.rst"]


@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page: str) -> None:
    # decode() reads the layout from the settings: the suite's, the default layout.
    results = doctest.testfile(
        str(DOCS / page),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        raise_on_error=False,
        verbose=False,
    )
    assert results.attempted > 0, f"docs/{page} has no example"
    assert results.failed == 0, f"{results.failed} of the {results.attempted} examples failed"
