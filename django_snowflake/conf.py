"""The ``SNOWFLAKE`` setting: defaults, and a lazy view that is read in this module only.

``conf`` normalises; :mod:`django_snowflake.checks` judges. Nothing here is read at import
time, and this module's cache is cleared when a test changes the setting with
``override_settings``. It depends on the layout alone: the owner of the process-local
generator, :mod:`django_snowflake.runtime`, listens for the change itself and rebuilds.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .layout import DEFAULT_EPOCH, PRESETS, BitLayout

DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "LAYOUT": "twitter",
        "TIME_BITS": None,
        "DATACENTER_BITS": None,
        "CLOCK_SEQUENCE_BITS": None,
        "WORKER_BITS": None,
        "SEQUENCE_BITS": None,
        "TIME_UNIT_MS": None,
        "EPOCH": DEFAULT_EPOCH,
        "CLOCK_ROLLBACK": "wait",
        "MAX_ROLLBACK_MS": 5,
        "WORKER_ALLOCATOR": "database",
        "WORKER_ID": None,
        "DATACENTER_ID": 0,
        "DATABASE": "default",
        "LEASE_SECONDS": 60,
        "FAILOVER": "skip",
        "PROCESS_LABEL": "",
        "CLAIM_ON_READY": False,
        "FUNCTION_SCHEMA": "public",
        "MARIADB_KEYS": "default",
    }
)

# Settings key -> BitLayout argument; a key left at None takes the preset's value.
LAYOUT_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "TIME_BITS": "time_bits",
        "DATACENTER_BITS": "datacenter_bits",
        "CLOCK_SEQUENCE_BITS": "clock_sequence_bits",
        "WORKER_BITS": "worker_bits",
        "SEQUENCE_BITS": "sequence_bits",
        "TIME_UNIT_MS": "time_unit_ms",
    }
)

ALLOCATORS: Mapping[str, str] = MappingProxyType(
    {
        "database": "django_snowflake.allocators.database.DatabaseAllocator",
        "static": "django_snowflake.allocators.static.StaticAllocator",
        "hostname": "django_snowflake.allocators.static.HostnameAllocator",
    }
)

WORKER_ID_ENV = "SNOWFLAKE_WORKER_ID"


def user_settings() -> Any:
    """``settings.SNOWFLAKE`` as the project wrote it, unjudged (``None`` when absent)."""
    return getattr(settings, "SNOWFLAKE", None)


@functools.cache
def get_settings() -> Mapping[str, Any]:
    """``DEFAULTS`` updated with ``settings.SNOWFLAKE``, as a read-only mapping.

    A ``SNOWFLAKE`` that is not a mapping is ignored here; the system checks report it.
    """
    user = user_settings() or {}
    if not isinstance(user, Mapping):
        user = {}
    return MappingProxyType({**DEFAULTS, **user})


def layout_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :class:`BitLayout` for these settings (preset, then overrides).

    Raises ``ValueError`` for an unknown preset.
    """
    preset = values["LAYOUT"]
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ValueError(f"Unknown layout preset {preset!r}; choose one of {', '.join(PRESETS)}")
    arguments: dict[str, Any] = {"datacenter_bits": 0, "clock_sequence_bits": 0}
    arguments.update(PRESETS[preset])
    for key, argument in LAYOUT_KEYS.items():
        if values[key] is not None:
            arguments[argument] = values[key]
    arguments["epoch"] = values["EPOCH"]
    return arguments


@functools.cache
def get_layout() -> BitLayout:
    """The layout the settings describe.

    Raises ``ImproperlyConfigured`` when they describe none; ``manage.py check`` says why.
    """
    try:
        return BitLayout(**layout_arguments(get_settings()))
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"SNOWFLAKE describes no valid layout ({exc}). Run `python manage.py check` "
            "for the details and hints."
        ) from exc


def allocator_path(values: Mapping[str, Any]) -> object:
    """The dotted path of the ``WORKER_ALLOCATOR`` class (a built-in's name resolved),
    unvalidated."""
    name = values["WORKER_ALLOCATOR"]
    return ALLOCATORS.get(name, name) if isinstance(name, str) else name


def configured_worker_id(values: Mapping[str, Any]) -> object:
    """``WORKER_ID``, or else the ``SNOWFLAKE_WORKER_ID`` environment variable, unvalidated."""
    if values["WORKER_ID"] is not None:
        return values["WORKER_ID"]
    raw = os.environ.get(WORKER_ID_ENV, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        return raw


@receiver(setting_changed)
def _clear_cache(*, setting: str, **kwargs: Any) -> None:
    if setting == "SNOWFLAKE":
        get_settings.cache_clear()
        get_layout.cache_clear()
