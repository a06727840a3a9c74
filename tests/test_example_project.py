"""The example shop, run as a newcomer runs it: its own manage.py, in fresh processes.

It has its own settings, so it runs in subprocesses, on a temporary SQLite file
(``EXAMPLE_DB``); its own tests (``example_project/shop/tests.py``, with its factory-boy
factories) run under its test settings.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.example import manage

pytestmark = pytest.mark.slow


def test_newcomer_commands(tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite3"
    manage("check", db=db)
    manage("makemigrations", "--check", "--dry-run", db=db)
    manage("migrate", db=db)
    first = manage("seed_demo", db=db).stdout
    assert "Created 5 products, 5 customers and 12 orders placed over the past 420 days." in first
    assert "username 'admin', password 'snowflake'" in first
    again = manage("seed_demo", db=db).stdout
    assert "Demo data is already there; nothing added." in again
    decoded = manage("decode_snowflake", "249881868931956749", db=db).stdout
    assert "worker_id" in decoded


def test_the_example_projects_own_tests(tmp_path: Path) -> None:
    result = manage("test", "shop", "--settings=config.test_settings", db=tmp_path / "t.sqlite3")
    assert "Ran 11 tests" in result.stderr


def test_the_first_key_of_a_process_made_by_sqlite_claims_before_the_insert(
    tmp_path: Path,
) -> None:
    # SnowflakeAutoField's key comes from django_snowflake_id() inside the INSERT, which holds
    # SQLite's write lock; the claim of a process's first ID must not wait for that lock
    # (it did, for the whole busy timeout, and the INSERT failed).
    db = tmp_path / "shop.sqlite3"
    manage("migrate", db=db)
    code = (
        "from shop.models import Customer;"
        "print(Customer.objects.create(name='First', email='first@example.com').pk)"
    )
    pk = int(manage("shell", "-v0", "-c", code, db=db).stdout)
    assert pk > 2**40


def test_the_first_key_of_a_process_inside_a_transaction_that_has_read(tmp_path: Path) -> None:
    # Inside atomic(), after a read, the caller's connection holds a shared lock until its
    # transaction ends, so a claim's write waited for it until the busy timeout (m2m add(),
    # the admin's views, ATOMIC_REQUESTS, when they made a process's first key).
    db = tmp_path / "shop.sqlite3"
    manage("migrate", db=db)
    code = (
        "from django.db import transaction;"
        "from shop.models import Customer;"
        "atomic = transaction.atomic();"
        "atomic.__enter__();"
        "Customer.objects.count();"
        "print(Customer.objects.create(name='First', email='first@example.com').pk);"
        "atomic.__exit__(None, None, None)"
    )
    started = time.monotonic()
    pk = int(manage("shell", "-v0", "-c", code, db=db).stdout)
    assert pk > 2**40
    assert time.monotonic() - started < 8, "the claim waited for the busy timeout"
