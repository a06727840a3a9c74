"""What a project's own test suite meets: pytest-django's database blocker, with and without
the recommended test settings."""

from __future__ import annotations

from typing import Any

import pytest

from django_snowflake import decode, generate
from django_snowflake.exceptions import WorkerLeaseLost


def test_recommended_settings_generate_without_database_access() -> None:
    # tests/settings.py uses the recommended static allocator; this test has no django_db.
    assert decode(generate()).worker_id == 0


def test_database_allocator_under_the_blocker_explains_the_fix(settings: Any) -> None:
    settings.SNOWFLAKE = {}
    with pytest.raises(WorkerLeaseLost, match=r"WORKER_ALLOCATOR.*static.*Testing"):
        generate()
