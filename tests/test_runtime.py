"""The process-local generator on the database allocator: transactions, async code, threads.

``database_generator`` (conftest.py) switches ``settings.SNOWFLAKE``; the runtime rebuilds the
generator, whose first ID claims a slot in the test database.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

import django_snowflake
from django_snowflake import decode, generate
from django_snowflake.allocators.base import THREAD_PREFIX
from django_snowflake.database_slots import DATABASE_HOST
from django_snowflake.models import WorkerNode

pytestmark = pytest.mark.django_db(transaction=True)


def test_claim_inside_a_rolled_back_transaction_holds(database_generator: Any) -> None:
    generator = database_generator()
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        generate()
        1 / 0  # noqa: B018
    assert generator.lease is not None
    row = WorkerNode.objects.get(worker_id=generator.lease.worker_id)
    assert row.process_id == os.getpid()
    assert row.released_at is None
    assert row.lease_expires_at > timezone.now()


def test_first_id_inside_a_transaction_that_wrote(database_generator: Any) -> None:
    generator = database_generator()
    if connection.vendor == "sqlite":
        # SQLite has one writer: the transaction below would lock the claim out, so claim
        # first, as docs/leases.rst advises.
        generator.ensure_lease()
    with transaction.atomic():
        User.objects.create(username="buyer")
        value = generate()
    assert decode(value).worker_id == WorkerNode.objects.get().worker_id


def test_first_id_from_async_code(database_generator: Any) -> None:
    database_generator()

    async def first() -> int:
        return generate()

    value = asyncio.run(first())
    assert decode(value).worker_id == WorkerNode.objects.get().worker_id


def test_ids_after_the_claim_issue_no_queries(database_generator: Any) -> None:
    database_generator()
    generate()
    executed: list[str] = []
    real_execute = CursorWrapper.execute

    def counting(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        # Every thread's cursors pass here (an ID that waited on the claim thread would
        # show), but the heartbeat's, which renews and, on MariaDB, moves the key clock each
        # second whatever the IDs do: on a loaded machine a beat fell inside the window.
        if threading.current_thread().name != f"{THREAD_PREFIX}heartbeat":
            executed.append(sql)
        return real_execute(self, sql, params)

    with mock.patch.object(CursorWrapper, "execute", counting):
        ids = [generate() for _ in range(1000)] + django_snowflake.generate_many(1000)
    assert executed == []
    assert len(set(ids)) == 2000


def test_threads_share_one_lease(database_generator: Any) -> None:
    database_generator()
    results: list[list[int]] = []

    def work() -> None:
        results.append([generate() for _ in range(5000)])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [i for chunk in results for i in chunk]
    assert len(set(ids)) == 20_000
    # One slot for the process (on PostgreSQL and MariaDB the database's own slot is a row).
    assert WorkerNode.objects.exclude(host_name=DATABASE_HOST).count() == 1
