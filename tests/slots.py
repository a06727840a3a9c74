"""``WorkerNode`` rows that the allocator tests plant: slots of another process on another host."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from django_snowflake.models import WorkerNode


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
