"""Allocators whose worker ID is fixed by configuration: ``static`` and ``hostname``."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..conf import configured_worker_id
from ..exceptions import WorkerLeaseLost
from ..generator import Lease
from .base import BaseAllocator

if TYPE_CHECKING:
    from ..generator import SnowflakeGenerator
    from ..layout import BitLayout

_ORDINAL = re.compile(r"-(\d+)$")


class StaticAllocator(BaseAllocator):
    """The worker ID from ``SNOWFLAKE["WORKER_ID"]`` or ``$SNOWFLAKE_WORKER_ID``.

    Nothing coordinates it: every process must be given its own ID. A fork of the process
    that built the allocator refuses to issue IDs rather than share the parent's worker ID.
    """

    name = "static"

    def __init__(self, layout: BitLayout, settings: Mapping[str, Any]) -> None:
        super().__init__(layout, settings)
        self.worker_id = self.resolve_worker_id()
        self.datacenter_id: int = settings["DATACENTER_ID"]
        self._owner_pid = os.getpid()

    def resolve_worker_id(self) -> int:
        worker_id = configured_worker_id(self.settings)
        if not isinstance(worker_id, int):
            raise ValueError(f"The static allocator needs an integer WORKER_ID, got {worker_id!r}")
        return worker_id

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        if os.getpid() != self._owner_pid:
            raise WorkerLeaseLost(
                f"Worker ID {self.worker_id} is configured for process {self._owner_pid}; "
                f"process {os.getpid()} is a fork of it and must not share the ID. Give each "
                'process its own WORKER_ID, or use WORKER_ALLOCATOR = "database".'
            )
        return Lease(self.worker_id, datacenter_id=self.datacenter_id)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "worker_id": self.worker_id}


def hostname_ordinal(hostname: str) -> int | None:
    """The trailing ordinal of a StatefulSet pod name (``web-3`` -> 3), or ``None``."""
    match = _ORDINAL.search(hostname)
    return int(match.group(1)) if match else None


def current_hostname() -> str:
    return os.environ.get("HOSTNAME") or socket.gethostname()


class HostnameAllocator(StaticAllocator):
    """The worker ID from the trailing ordinal of the host name (Kubernetes StatefulSets)."""

    name = "hostname"

    def resolve_worker_id(self) -> int:
        hostname = current_hostname()
        ordinal = hostname_ordinal(hostname)
        if ordinal is None:
            raise ValueError(f"The host name {hostname!r} does not end in -<ordinal>")
        return ordinal
