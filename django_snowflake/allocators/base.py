"""The allocator interface, shared by the database, static and hostname allocators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..generator import Lease, SnowflakeGenerator
    from ..layout import BitLayout


class BaseAllocator:
    """Leases worker slots to the process-local generator.

    Subclasses implement :meth:`acquire`. The runtime calls :meth:`close` at a clean exit or
    when the settings change, and :meth:`after_fork_in_child` in a child process, before the
    child's generator asks for its own lease.
    """

    #: The name shown by ``show_worker``; the ``WORKER_ALLOCATOR`` value of the built-ins.
    name = "custom"

    def __init__(self, layout: BitLayout, settings: Mapping[str, Any]) -> None:
        self.layout = layout
        self.settings = settings

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        """Renew the generator's lease or claim a fresh slot; raise a ``SnowflakeError`` if
        neither is possible."""
        raise NotImplementedError("subclasses of BaseAllocator must provide acquire()")

    def persist_clock_sequence(self, value: int) -> None:
        """Store a new clock-sequence value before the generator uses it (no-op here)."""

    def close(self) -> None:
        """Release the slot held, if any (no-op here)."""

    def after_fork_in_child(self) -> None:
        """Forget state inherited from the parent process (no-op here)."""

    def describe(self) -> dict[str, Any]:
        """Facts about the lease for ``show_worker``."""
        return {"allocator": self.name}
