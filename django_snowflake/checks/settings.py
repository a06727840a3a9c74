"""The checks of ``settings.SNOWFLAKE`` as :mod:`django_snowflake.conf` reads it: bits and
layout (E001-E007), epoch and time unit (E010-E013, W010), rollback policy (E020-E022),
allocator, worker and database (E030, E034-E037; the allocator judges the rest of its own
settings), the databases' function (E052, E054).

The message helpers here serve the package's other modules too.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy as _

from .. import conf
from ..allocators.base import BaseAllocator, is_int, settings_message
from ..generator import POLICIES
from ..layout import MAX_BITS, PRESETS, BitLayout, ms_to_datetime, parse_epoch

# JavaScript's Number reads integers exactly only below 2**53: the js_safe layout's promise.
JS_SAFE_BITS = 53
# One minute: a wait beyond it stalls every caller, and a ring window beyond it costs memory.
MAX_ROLLBACK_LIMIT_MS = 60_000
#: SNOWFLAKE["FAILOVER"]: what a claim does after the coordination database failed over.
FAILOVER_CHOICES = ("skip", "wait")


def _error(id: str, msg: Any, hint: Any, **values: object) -> CheckMessage:
    return settings_message(Error, id, msg, hint, **values)


def _warning(id: str, msg: Any, hint: Any, **values: object) -> CheckMessage:
    return settings_message(Warning, id, msg, hint, **values)


def _join(values: Any) -> str:
    return ", ".join(map(str, values))


#: The check ID, message and hint of each setting that must name one of a set
#: (:func:`_not_one_of`).
_NOT_ONE_OF = {
    "LAYOUT": (
        "E003",
        _("LAYOUT %(value)s is not a layout preset."),
        _("Choose one of %(presets)s; set *_BITS keys to adjust it."),
    ),
    "CLOCK_ROLLBACK": (
        "E020",
        _("CLOCK_ROLLBACK %(value)s is not a rollback policy."),
        _("Choose one of %(policies)s."),
    ),
    "FAILOVER": (
        "E024",
        _("FAILOVER must be one of %(choices)s, not %(value)s."),
        _(
            'Use "skip" (after a failover, issue at once, the first keys ahead of the clock '
            'by up to 1.25 leases) or "wait" (issue nothing until 1.25 leases after the '
            "failover was first seen, every key at the clock)."
        ),
    ),
    "DATABASE": (
        "E034",
        _("DATABASE %(value)s is not a key of settings.DATABASES."),
        _("Use one of %(aliases)s."),
    ),
    "MARIADB_KEYS": (
        "E054",
        _("MARIADB_KEYS must be one of %(choices)s, not %(value)s."),
        _(
            'Use "default" (the column default over one sequence: the speed of '
            'AUTO_INCREMENT) or "trigger" (the strict path: the failover skip inside '
            "every INSERT, at a cost to every INSERT into a keyed table)."
        ),
    ),
}


def _not_one_of(values: Mapping[str, Any], key: str, **choices: Any) -> CheckMessage:
    """The error of setting ``key``, whose value is not one of the set its keyword names (the
    placeholder of the words that list it)."""
    id, msg, hint = _NOT_ONE_OF[key]
    joined = {name: _join(members) for name, members in choices.items()}
    return _error(id, msg, hint, value=repr(values[key]), **joined)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every problem with ``settings.SNOWFLAKE``, as errors and warnings with hints."""
    raw = conf.user_settings()
    if raw is not None and not isinstance(raw, Mapping):
        return [
            _error(
                "E001",
                _("SNOWFLAKE must be a dict, not %(type)s."),
                _('Write SNOWFLAKE = {"LAYOUT": "twitter", ...}, or remove it for the defaults.'),
                type=type(raw).__name__,
            )
        ]
    values = conf.get_settings()
    messages: list[CheckMessage] = []
    # key=str: a SNOWFLAKE with both int and str keys must not crash the check.
    unknown = sorted(set(raw or {}) - set(conf.DEFAULTS), key=str)
    if unknown:
        messages.append(
            _error(
                "E002",
                _("SNOWFLAKE has unknown keys: %(keys)s."),
                _("Known keys are %(known)s; check the spelling."),
                keys=_join(unknown),
                known=_join(conf.DEFAULTS),
            )
        )
    layout = _check_layout(values, messages)
    _check_policy(values, layout, messages)
    _check_allocator(values, layout, messages)
    _check_function_schema(values, messages)
    _check_mariadb_keys(values, messages)
    if values["FAILOVER"] not in FAILOVER_CHOICES:
        messages.append(_not_one_of(values, "FAILOVER", choices=FAILOVER_CHOICES))
    return messages


# PostgreSQL's NAMEDATALEN - 1: a longer name is silently cut, naming another schema.
MAX_IDENTIFIER_BYTES = 63


def _check_function_schema(values: Mapping[str, Any], messages: list[CheckMessage]) -> None:
    name = values["FUNCTION_SCHEMA"]
    if (
        isinstance(name, str)
        and name.strip()
        and len(name.encode()) <= MAX_IDENTIFIER_BYTES
        and "\x00" not in name
        and not name.lower().startswith("pg_")
    ):
        return
    messages.append(
        _error(
            "E052",
            _(
                "FUNCTION_SCHEMA must be the name of a PostgreSQL schema (a non-empty string of "
                "at most 63 bytes, not starting with pg_), not %(value)r."
            ),
            _(
                'Use "public" (the default) or a schema name of your own, such as '
                '"snowflake": the PostgreSQL database function and its sequences live there.'
            ),
            value=name,
        )
    )


def _check_mariadb_keys(values: Mapping[str, Any], messages: list[CheckMessage]) -> None:
    from ..vendors.mysql.keys import KEYS

    if values["MARIADB_KEYS"] not in KEYS:
        messages.append(_not_one_of(values, "MARIADB_KEYS", choices=KEYS))


def _check_layout(values: Mapping[str, Any], messages: list[CheckMessage]) -> BitLayout | None:
    errors = len(messages)
    preset = values["LAYOUT"]
    if not isinstance(preset, str) or preset not in PRESETS:
        messages.append(_not_one_of(values, "LAYOUT", presets=PRESETS))
        return None
    arguments = conf.layout_arguments(values)
    for key, argument in conf.LAYOUT_KEYS.items():
        value = arguments[argument]
        if key == "TIME_UNIT_MS":
            if not is_int(value) or value < 1:
                messages.append(
                    _error(
                        "E012",
                        _("TIME_UNIT_MS must be a positive integer, not %(value)s."),
                        _("Use 1 (milliseconds), 10 or 1000 (seconds)."),
                        value=repr(value),
                    )
                )
        elif not is_int(value) or value < 0:
            messages.append(
                _error(
                    "E004",
                    _("%(key)s must be a non-negative integer, not %(value)s."),
                    _("Remove %(key)s to take the %(preset)s preset's value."),
                    key=key,
                    value=repr(value),
                    preset=repr(preset),
                )
            )
    if len(messages) > errors:
        return None
    total = sum(arguments[name] for name in conf.LAYOUT_KEYS.values() if name != "time_unit_ms")
    if total > MAX_BITS:
        messages.append(
            _error(
                "E005",
                _("The layout uses %(bits)s bits; at most %(max)s fit in a signed 64-bit integer."),
                _("Lower TIME_BITS, WORKER_BITS or SEQUENCE_BITS until they sum to 63 or less."),
                bits=total,
                max=MAX_BITS,
            )
        )
    if arguments["time_bits"] < 1:
        messages.append(
            _error(
                "E006",
                _("TIME_BITS must be at least 1."),
                _("Use 41 bits for about 70 years in milliseconds."),
            )
        )
    try:
        epoch_ms = parse_epoch(values["EPOCH"])
    except (TypeError, ValueError):
        # parse_epoch's reason is English: the hint names every form that is read instead.
        messages.append(
            _error(
                "E010",
                _("EPOCH %(value)s is not a time this package can read."),
                _(
                    "Use a time from 1970 on: an ISO-8601 string with a time zone "
                    '("2025-01-01T00:00:00Z"), an aware datetime, or integer milliseconds since '
                    "1970."
                ),
                value=repr(values["EPOCH"]),
            )
        )
        return None
    if len(messages) > errors:
        return None
    layout = BitLayout(**arguments)
    if preset == "js_safe" and layout.total_bits > JS_SAFE_BITS:
        messages.append(_js_unsafe(layout))
    now = datetime.now(UTC)
    if epoch_ms > now.timestamp() * 1000:
        messages.append(
            _error(
                "E011",
                # The value as written: a far-future int would overflow a datetime.
                _("EPOCH %(value)s is in the future."),
                _("Choose an epoch in the past; no ID can be made before it."),
                value=repr(values["EPOCH"]),
            )
        )
        return layout
    # Compare in ms: with 48+ time bits of 1 ms the end lies past datetime's year 9999.
    end_ms = layout.unit_start_ms(layout.max_time + 1)
    now_ms = now.timestamp() * 1000
    if end_ms <= now_ms:
        messages.append(
            _error(
                "E013",
                _("The layout's lifespan ended on %(end)s."),
                _(
                    "Give TIME_BITS more bits or move EPOCH later, in a new table: the change "
                    "reorders existing IDs."
                ),
                end=layout.lifespan_end.isoformat(),
            )
        )
    elif (end_ms - now_ms) < (end_ms - epoch_ms) / 10:
        messages.append(
            _warning(
                "W010",
                _("Less than a tenth of the layout's lifespan is left: it ends on %(end)s."),
                _(
                    "Plan a migration to a layout with more TIME_BITS before then; generation "
                    "stops at the end instead of wrapping."
                ),
                # 0.9 of the lifespan is past, so the end is near enough for a datetime.
                end=layout.lifespan_end.isoformat(),
            )
        )
    return layout


def _js_unsafe(layout: BitLayout) -> CheckMessage:
    """E007: the first time unit whose IDs reach 2**53, as a date."""
    first_unsafe = 1 << max(JS_SAFE_BITS - layout.time_shift, 0)
    try:
        when = ms_to_datetime(layout.unit_start_ms(first_unsafe)).isoformat()
    except OverflowError:
        when = "9999-12-31"
    return _error(
        "E007",
        _(
            "LAYOUT 'js_safe' with these bits makes IDs of %(bits)s bits: from %(when)s on "
            "they pass 2**53, above which JavaScript rounds integers."
        ),
        _(
            "Keep the bits at 53 or fewer in all (TIME_BITS, DATACENTER_BITS, "
            "CLOCK_SEQUENCE_BITS, WORKER_BITS, SEQUENCE_BITS), or choose another LAYOUT and "
            "send IDs to browsers as strings."
        ),
        bits=layout.total_bits,
        when=when,
    )


def _check_policy(
    values: Mapping[str, Any], layout: BitLayout | None, messages: list[CheckMessage]
) -> None:
    policy = values["CLOCK_ROLLBACK"]
    if policy not in POLICIES:
        messages.append(_not_one_of(values, "CLOCK_ROLLBACK", policies=POLICIES))
    bound = values["MAX_ROLLBACK_MS"]
    if not is_int(bound) or not 0 <= bound <= MAX_ROLLBACK_LIMIT_MS:
        messages.append(
            _error(
                "E021",
                _("MAX_ROLLBACK_MS must be an integer from 0 to %(max)s, not %(value)s."),
                _(
                    "The default, 5 ms, covers NTP slews. A larger bound makes callers wait "
                    "that long with the generator locked, and the ring policy keeps a slot per "
                    "time unit."
                ),
                max=MAX_ROLLBACK_LIMIT_MS,
                value=repr(bound),
            )
        )
    if policy == "clock_sequence" and layout is not None and layout.clock_sequence_bits == 0:
        messages.append(
            _error(
                "E022",
                _(
                    "CLOCK_ROLLBACK 'clock_sequence' needs clock-sequence bits, and the layout "
                    "has none."
                ),
                _(
                    "Set CLOCK_SEQUENCE_BITS (e.g. 2) and take as many bits from WORKER_BITS or "
                    "SEQUENCE_BITS, or choose another policy."
                ),
            )
        )


def allocator_class(values: Mapping[str, Any]) -> type[BaseAllocator] | None:
    """The ``WORKER_ALLOCATOR`` class, or ``None`` if it names no allocator."""
    path = conf.allocator_path(values)
    try:
        found = import_string(path) if isinstance(path, str) else None
    except ImportError:
        return None
    if isinstance(found, type) and issubclass(found, BaseAllocator) and found is not BaseAllocator:
        return found
    return None


def _check_allocator(
    values: Mapping[str, Any], layout: BitLayout | None, messages: list[CheckMessage]
) -> None:
    allocator = allocator_class(values)
    if allocator is None:
        messages.append(
            _error(
                "E030",
                _(
                    "WORKER_ALLOCATOR %(value)s is neither a built-in allocator nor an "
                    "importable BaseAllocator subclass."
                ),
                _(
                    "Use one of %(builtins)s, or a dotted path to a subclass of "
                    "django_snowflake.allocators.base.BaseAllocator."
                ),
                value=repr(values["WORKER_ALLOCATOR"]),
                builtins=_join(conf.ALLOCATORS),
            )
        )
    else:
        # The allocator judges the settings it reads, so a subclass inherits its checks.
        messages.extend(allocator.check(values, layout))
    alias = values["DATABASE"]
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        messages.append(_not_one_of(values, "DATABASE", aliases=map(repr, settings.DATABASES)))
    lease = values["LEASE_SECONDS"]
    if not is_int(lease) or lease < 3:
        messages.append(
            _error(
                "E035",
                _("LEASE_SECONDS must be an integer of at least 3, not %(value)s."),
                _("The default, 60, renews every 20 seconds."),
                value=repr(lease),
            )
        )
    label = values["PROCESS_LABEL"]
    if not isinstance(label, str) or len(label) > 100:
        messages.append(
            _error(
                "E036",
                _("PROCESS_LABEL must be a string of at most 100 characters, not %(value)s."),
                _('Use a short name such as "web" or "celery".'),
                value=repr(label),
            )
        )
    if not isinstance(values["CLAIM_ON_READY"], bool):
        messages.append(
            _error(
                "E037",
                _("CLAIM_ON_READY must be True or False, not %(value)s."),
                _("Leave it False to claim the worker slot at the first ID."),
                value=repr(values["CLAIM_ON_READY"]),
            )
        )
