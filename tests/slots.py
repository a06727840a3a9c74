"""``WorkerNode`` rows that the allocator tests plant (slots of another process on another host),
and an allocator whose queries run on the thread that asks for a slot."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone

from django_snowflake.allocators.database import DatabaseAllocator
from django_snowflake.models import WorkerNode

T = TypeVar("T")


class CallerThreadAllocator(DatabaseAllocator):
    """The database allocator with its queries on the caller's thread, in a transaction.

    A custom allocator may do that: the generator then calls it holding its lock, and the
    hooks its queries fire (the thread's first connection, SQLite's ``BEGIN``) must not wait
    for the claim they are part of.
    """

    def _run(self, function: Callable[[], T]) -> T:
        with transaction.atomic(using=self.alias):
            return function()


def expired_slot(worker_id: int, last_timestamp: int, *, layout: str, **fields: Any) -> WorkerNode:
    """A slot whose lease ended an hour ago, its high-water mark at ``last_timestamp``."""
    return _slot(worker_id, layout=layout, expired=True, last_timestamp=last_timestamp, **fields)


def held_slot(worker_id: int, *, layout: str, **fields: Any) -> WorkerNode:
    """A slot leased for another hour, which no claim may take."""
    return _slot(worker_id, layout=layout, expired=False, last_timestamp=0, **fields)


def _slot(worker_id: int, *, layout: str, expired: bool, **fields: Any) -> WorkerNode:
    now, hour = timezone.now(), timedelta(hours=1)
    seen = now - hour if expired else now
    fields.setdefault("host_name", "elsewhere")
    return WorkerNode.objects.create(
        worker_id=worker_id,
        process_id=1,
        launched_at=seen,
        heartbeat_at=seen,
        lease_expires_at=now - hour if expired else now + hour,
        layout=layout,
        token="previous" if expired else "live",
        **fields,
    )
