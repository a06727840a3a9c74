"""The allocator interface, shared by the database, static and hostname allocators."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from django.core.checks import CheckMessage, Error, Warning
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

    from ..generator import Lease, SnowflakeGenerator
    from ..layout import BitLayout

#: The object every settings check names.
SETTINGS_OBJ = "settings.SNOWFLAKE"


def _interpolate(message: StrOrPromise, values: Mapping[str, object]) -> str:
    return str(message) % values if values else str(message)


# Translated when the message is shown, in the language active then, not when it is made.
_lazy_interpolate = lazy(_interpolate, str)


def settings_message(
    level: type[Error] | type[Warning],
    id: str,
    msg: StrOrPromise,
    hint: StrOrPromise,
    /,
    obj: object = SETTINGS_OBJ,
    **values: object,
) -> CheckMessage:
    """A check message ``django_snowflake.<id>``: ``msg`` and ``hint`` are ``gettext_lazy``
    strings whose ``%(name)s`` placeholders ``values`` fill in."""
    return level(
        _lazy_interpolate(msg, values),
        hint=_lazy_interpolate(hint, values),
        obj=obj,
        id=f"django_snowflake.{id}",
    )


#: How an allocator names the threads it runs its queries on (the database allocator's claim
#: and heartbeat threads).
THREAD_PREFIX = "snowflake-"


def on_allocator_thread() -> bool:
    """Whether this thread is one of an allocator's own (named :data:`THREAD_PREFIX`...).

    The package's hooks leave the generator alone there: that thread's queries are the claim
    or renewal a generator may be waiting for.
    """
    return threading.current_thread().name.startswith(THREAD_PREFIX)


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


class BaseAllocator:
    """Leases worker slots to the process-local generator.

    Subclasses implement :meth:`acquire`, and extend :meth:`check` with the settings they
    read. The runtime calls :meth:`close` at a clean exit or when the settings change, and
    :meth:`after_fork_in_child` in a child process, before the child's generator asks for
    its own lease.
    """

    #: The name shown by ``show_worker``; the ``WORKER_ALLOCATOR`` value of the built-ins.
    name = "custom"

    @classmethod
    def check(
        cls, settings: Mapping[str, Any], layout: BitLayout | None, **kwargs: Any
    ) -> list[CheckMessage]:
        """The problems with ``settings`` (``SNOWFLAKE`` with its defaults) for this allocator,
        as system-check messages; ``layout`` is ``None`` when the settings describe none.

        Extend it as Django's ``Field.check()`` is extended:
        ``return [*super().check(settings, layout, **kwargs), *own_checks]``. An allocator
        whose constructor can refuse settings must refuse them here first: ``manage.py
        check`` shows this method's hints, while a constructor's error only stops the first ID.
        """
        datacenter_id = settings["DATACENTER_ID"]
        if layout is None:
            return []
        in_range = is_int(datacenter_id) and 0 <= datacenter_id <= layout.max_datacenter_id
        if in_range:
            return []
        if is_int(datacenter_id):
            msg = _("DATACENTER_ID %(value)s is outside 0..%(max)s.")
            hint = _("Set DATACENTER_BITS wide enough, or choose an ID in range.")
        else:
            msg = _("DATACENTER_ID must be an integer, not %(value)s.")
            hint = _("Write DATACENTER_ID as a number from 0 to %(max)s, without quotes.")
        return [
            settings_message(
                Error,
                "E033",
                msg,
                hint,
                value=repr(datacenter_id),
                max=layout.max_datacenter_id,
            )
        ]

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
