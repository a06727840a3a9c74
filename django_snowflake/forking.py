"""What a fork does to a generator: the child drops the parent's lease and lock and claims a
slot of its own at its first ID (gunicorn ``--preload``, Celery prefork, multiprocessing), and
a fork that ran none of Python's fork hooks (uWSGI's, in C) is refused rather than let two
processes issue under one slot. Imports nothing from Django, like the generator that inherits
it (:class:`Forkable`)."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from .exceptions import WorkerLeaseLost

#: Every generator of the process, which the fork hook resets in the child.
LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


def _reset_generators_after_fork() -> None:
    for generator in list(LIVE):
        generator._after_fork_in_child()


os.register_at_fork(after_in_child=_reset_generators_after_fork)


class Forkable:
    """The fork handling of :class:`~django_snowflake.generator.SnowflakeGenerator`."""

    _pid: int
    _lock: threading.Lock
    _calling_out: int | None

    def _drop_lease(self) -> None:
        raise NotImplementedError

    def _slot_worker_id(self) -> int | None:
        raise NotImplementedError

    def _check_fork(self) -> None:
        """Refuse to issue in a child of a fork that ran no hooks (before the lock is taken)."""
        if os.getpid() != self._pid:
            self._refuse_hookless_fork()

    def _refuse_hookless_fork(self) -> None:
        """A fork that skipped Python's fork hooks still holds the parent's slot: refuse.

        uWSGI forks its workers in C after loading the application, so the hooks that give a
        child its own slot (os.register_at_fork) never run there. Checked once per slow-path
        ID (a system call costs the fast path too much): a child of a process that was issuing
        IDs at the fork may still take what is left of that one time unit's window. Called
        before the lock is taken: a thread of the parent (the heartbeat) may have held it at
        the fork, and no thread of this process will ever release it, so the lock is new.
        """
        self._lock = threading.Lock()
        self._drop_lease()
        raise WorkerLeaseLost(
            WorkerLeaseLost.FORKED_WITHOUT_HOOKS,
            worker_id=self._slot_worker_id(),
            parent_pid=self._pid,
        )

    def _after_fork_in_child(self) -> None:
        # The parent's lock may have been held by another thread at fork time, and the
        # parent keeps its slot: the child starts with a fresh lock and no lease.
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._calling_out = None
        self._drop_lease()
