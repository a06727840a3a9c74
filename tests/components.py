"""The marks of a test module that starts a real component of its own (a Galera or a Patroni
cluster): it runs on one database, and skips where the component is missing, except under
``CI``, where its fixture fails instead (it must run there)."""

from __future__ import annotations

import os

import pytest


def component_marks(
    mark: pytest.MarkDecorator, vendor: str, name: str, missing: str
) -> list[pytest.MarkDecorator]:
    """``mark``, a skip unless ``SNOWFLAKE_TEST_DB`` is ``vendor``, and a skip outside CI
    while ``missing`` (what the machine lacks to run ``name``) is not empty."""
    return [
        mark,
        pytest.mark.skipif(
            os.environ.get("SNOWFLAKE_TEST_DB", "sqlite") != vendor,
            reason=f"the {name} tests run under SNOWFLAKE_TEST_DB={vendor}",
        ),
        pytest.mark.skipif(
            bool(missing) and not os.environ.get("CI"), reason=f"no {name} here: {missing} missing"
        ),
    ]
