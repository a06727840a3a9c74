"""System checks, numbered by subject; this module gathers them, the allocators judge theirs.

E001-E009 bits and layout, E010-E019 epoch and time unit, E020-E029 rollback policy,
E030-E039 allocator, worker and database (W031-W034 also for ``check --deploy``), E040-E049
(W040-W049) fields and models, E050-E059 (W050-W059) the databases' own function.
Every message and hint is translated when it is shown.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.apps import AppConfig, apps
from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.checks import CheckMessage, Error, Warning
from django.core.exceptions import FieldDoesNotExist
from django.db.models import AutoField, Model
from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy as _

from . import conf, runtime
from .allocators.base import BaseAllocator, is_int, settings_message
from .allocators.database import DatabaseAllocator
from .allocators.failover import asynchronous_standbys
from .allocators.static import StaticAllocator
from .fields import SnowflakeAutoField, SnowflakeField
from .generator import POLICIES
from .layout import MAX_BITS, PRESETS, BitLayout, ms_to_datetime, parse_epoch

# JavaScript's Number reads integers exactly only below 2**53: the js_safe layout's promise.
JS_SAFE_BITS = 53
# One minute: a wait beyond it stalls every caller, and a ring window beyond it costs memory.
MAX_ROLLBACK_LIMIT_MS = 60_000


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
    from .vendors.mysql.keys import KEYS

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


def _database_allocator_in(databases: Any) -> str | None:
    """The alias of the worker table when these checks may read it, else ``None``: only the
    database allocator has one, and only valid settings say where it is."""
    values = conf.get_settings()
    alias = values["DATABASE"]
    if databases is None or alias not in databases or runtime.settings_errors():
        return None
    allocator = allocator_class(values)
    return alias if allocator is not None and issubclass(allocator, DatabaseAllocator) else None


def check_worker_table(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """E039: the worker table holds slots claimed under another layout."""
    values = conf.get_settings()
    if databases is None or values["DATABASE"] not in databases or runtime.settings_errors():
        return []
    from django.db import DatabaseError

    from .models import WorkerNode

    alias = values["DATABASE"]
    ours = conf.get_layout().fingerprint
    try:
        theirs = (
            WorkerNode.objects.using(alias)
            .exclude(layout=ours)
            .values_list("layout", flat=True)
            .first()
        )
    except DatabaseError:  # not migrated yet: nothing to compare
        return []
    if theirs is None:
        return []
    return [
        _error(
            "E039",
            _(
                "The worker table of database %(alias)s holds slots claimed under the layout "
                "%(theirs)s, but the settings describe %(ours)s."
            ),
            _(
                "Restore the SNOWFLAKE layout those IDs were made with. Only if no row of any "
                "table holds an ID of the old layout, delete the old WorkerNode rows."
            ),
            alias=repr(alias),
            theirs=theirs,
            ours=ours,
        )
    ]


def settings_errors() -> list[str]:
    """The IDs of the errors that keep the settings from building a generator: the verdict
    ``AppConfig.ready()`` hands to :func:`django_snowflake.runtime.configure`."""
    return [message.id or "" for message in check_settings() if message.is_serious()]


def check_standbys(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W030: the worker table's database streams to asynchronous standbys."""
    alias = _database_allocator_in(databases)
    if alias is None:
        return []
    count = asynchronous_standbys(alias)
    if not count:  # none, or the database does not let us see them
        return []
    return [
        _warning(
            "W030",
            _(
                "The database %(alias)s, which holds the worker table, replicates to "
                "asynchronous standbys (%(count)s): a failover to one may lose the last lease "
                "writes."
            ),
            _(
                "No ID repeats: after a failover, claims wait LEASE_SECONDS and a quarter "
                'before they issue IDs (docs: "High-availability databases"). To lose no write, '
                "replicate synchronously (synchronous_standby_names, semi-synchronous "
                "replication) at the cost of a round trip per commit; the wait stays, as every "
                "promotion is a new incarnation. Else silence django_snowflake.W030 in "
                "SILENCED_SYSTEM_CHECKS."
            ),
            alias=repr(alias),
            count=count,
        )
    ]


# Before production (check --deploy): W031-W034.

# The tag of the checks that run with check --deploy only (Django has no such tag of its own).
DEPLOYMENT = "deployment"
# Patroni's default leader ttl: the shortest automatic failover of the setups the
# high-availability page lists (RDS Multi-AZ takes one to two minutes).
FAILOVER_SECONDS = 30


def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W031-W034: settings that pass ``check`` but that a production deploy gets wrong."""
    if runtime.settings_errors():
        return []  # the errors come first
    values = conf.get_settings()
    allocator = allocator_class(values)
    messages: list[CheckMessage] = []
    static = allocator is not None and issubclass(allocator, StaticAllocator)
    if static and values["WORKER_ID"] is not None:
        messages.append(
            _warning(
                "W031",
                _(
                    "The static allocator takes the worker ID %(value)s from the settings: "
                    "every process started with them, on every server, issues IDs as "
                    "worker %(value)s, and two such processes issue the same IDs."
                ),
                _(
                    "Remove WORKER_ID and give each process its own ID in the %(variable)s "
                    "environment variable, or use the database allocator, which leases a "
                    "slot per process. If only ever one process runs these settings, add "
                    '"django_snowflake.W031" to SILENCED_SYSTEM_CHECKS.'
                ),
                value=values["WORKER_ID"],
                variable=conf.WORKER_ID_ENV,
            )
        )
    if allocator is not None and issubclass(allocator, DatabaseAllocator):
        lease = values["LEASE_SECONDS"]
        if lease < FAILOVER_SECONDS:
            messages.append(
                _warning(
                    "W032",
                    _(
                        "LEASE_SECONDS is %(value)s, shorter than a database failover "
                        "(%(failover)s seconds or more): during one, the leases of every process "
                        "run out and generating IDs raises WorkerLeaseLost until the database "
                        "is back."
                    ),
                    _(
                        "Use 60 (the default) or more; a longer lease only delays the reuse of "
                        'a crashed process\'s slot (docs: "High-availability databases").'
                    ),
                    value=lease,
                    failover=FAILOVER_SECONDS,
                )
            )
        alias = values["DATABASE"]
        engine = settings.DATABASES[alias].get("ENGINE", "")
        if engine.endswith("sqlite3"):
            messages.append(
                _warning(
                    "W033",
                    _(
                        "The worker table is in the SQLite database %(alias)s, which only the "
                        "processes of one machine share: a second server with its own file "
                        "claims the same worker IDs and issues the same IDs."
                    ),
                    _(
                        'For several servers, put the worker table (SNOWFLAKE["DATABASE"]) '
                        "on a PostgreSQL or MariaDB database they all reach. If only ever one "
                        'machine runs these settings, add "django_snowflake.W033" to '
                        "SILENCED_SYSTEM_CHECKS."
                    ),
                    alias=repr(alias),
                )
            )
    if values["CLOCK_ROLLBACK"] == "raise":
        messages.append(
            _warning(
                "W034",
                _(
                    "CLOCK_ROLLBACK is 'raise': every step back of the server's clock, even an "
                    "NTP correction of a millisecond, makes generating an ID raise "
                    "ClockMovedBackwards."
                ),
                _(
                    "Use 'wait' (the default), which sleeps through steps of up to "
                    "MAX_ROLLBACK_MS and raises only beyond them."
                ),
            )
        )
    return messages


# Fields and models: W040-W049.

SWITCH = "django_snowflake.fields.SnowflakeAutoField"
# Integer columns that cannot hold a 64-bit key.
NARROW_INTEGER_TYPES = frozenset(
    {
        "AutoField",
        "IntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallAutoField",
        "SmallIntegerField",
    }
)


def _model_warning(id: str, msg: Any, hint: Any, obj: object, **values: object) -> CheckMessage:
    return settings_message(Warning, id, msg, hint, obj=obj, **values)


def is_snowflake_keyed(model: type[Model]) -> bool:
    """Whether ``model``'s primary key is a Snowflake, also through multi-table parent links."""
    pk: Any = model._meta.pk
    while pk is not None and pk.is_relation:
        pk = pk.target_field
    return isinstance(pk, SnowflakeField | SnowflakeAutoField)


def _site_directories() -> set[Path]:
    paths = sysconfig.get_paths()
    found = {Path(paths[key]) for key in ("purelib", "platlib")}
    found.update(Path(path) for path in site.getsitepackages())
    found.add(Path(site.getusersitepackages()))
    return {path.resolve() for path in found}


def project_directory() -> Path | None:
    """Where the project's own apps live: ``settings.BASE_DIR`` (startproject writes it), else
    the directory holding the settings module's package (the one with ``manage.py``)."""
    base = getattr(settings, "BASE_DIR", None)
    if isinstance(base, str | Path):
        return Path(base).resolve()
    # override_settings() hides SETTINGS_MODULE; the environment still names it.
    name = getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(ENVIRONMENT_VARIABLE)
    module = sys.modules.get(name or "")
    path = getattr(module, "__file__", None)
    if path is None:
        return None
    directory = Path(path).resolve().parent
    # config/settings.py -> the project; settings.py beside manage.py -> that directory.
    return directory.parent if (directory / "__init__.py").exists() else directory


def is_installed_package(app_config: AppConfig) -> bool:
    """Whether the app is Django's or another distribution's, not the project's own: such apps
    pin ``default_auto_field`` so that their migrations never follow the project's setting,
    and the project cannot change them.

    The project's own apps are those under its directory (:func:`project_directory`) and not
    in a ``site-packages``: an app installed in editable mode from a checkout elsewhere is
    someone else's, and a virtualenv inside the project holds packages, not the project's apps.
    """
    if app_config.name == "django" or app_config.name.startswith("django."):
        return True
    path = Path(app_config.path).resolve()
    if any(path.is_relative_to(directory) for directory in _site_directories()):
        return True
    project = project_directory()
    return project is not None and not path.is_relative_to(project)


def is_historical(model: type[Model]) -> bool:
    """Whether django-simple-history generated the model (``HistoricalRecords()``)."""
    return any(base.__module__.startswith("simple_history.") for base in model.__mro__[1:])


def _switched() -> bool:
    """Whether ``DEFAULT_AUTO_FIELD`` is SnowflakeAutoField, or a subclass of it."""
    value = getattr(settings, "DEFAULT_AUTO_FIELD", None)
    if not isinstance(value, str):
        return False
    try:
        field = import_string(value)
    except ImportError:
        return False  # Django's own check reports it
    return isinstance(field, type) and issubclass(field, SnowflakeAutoField)


def check_auto_field_switch(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W040: the project's own models that keep an integer key under the one-line switch.

    Django's apps and installed packages pin their own ``default_auto_field``, as
    ``django_snowflake`` does for ``WorkerNode``: expected, and nothing the project changes.
    """
    if not _switched():
        return []
    # (message, hint, object, values): one per model declaring its key, one per app pinning
    # its own.
    overrides: list[tuple[Any, Any, object, dict[str, object]]] = []
    for app_config in app_configs or apps.get_app_configs():
        if app_config.name == "django_snowflake" or is_installed_package(app_config):
            continue
        pinned = []
        for model in app_config.get_models():
            pk: Any = model._meta.pk
            if is_historical(model):
                continue  # simple-history writes its key: W043
            # Other keys (UUID, text, a parent link) are a choice, not a switch that missed.
            # AutoField's isinstance() also holds for BigAutoField and SmallAutoField.
            if not isinstance(pk, AutoField) or isinstance(pk, SnowflakeAutoField):
                continue
            if pk.auto_created:
                pinned.append(model)
                continue
            overrides.append(
                (
                    _(
                        "%(model)s declares its primary key %(field)s as %(type)s, so it keeps "
                        "integer keys although DEFAULT_AUTO_FIELD is %(switch)s."
                    ),
                    _(
                        "Remove the field to take DEFAULT_AUTO_FIELD, or declare it as "
                        "SnowflakeAutoField(primary_key=True), then run makemigrations (docs: "
                        '"Migrating"). If the integer key is deliberate, add '
                        '"django_snowflake.W040" to SILENCED_SYSTEM_CHECKS.'
                    ),
                    model,
                    {"model": model._meta.label, "field": repr(pk.name), "type": type(pk).__name__},
                )
            )
        if pinned:
            config = type(app_config)
            overrides.append(
                (
                    _(
                        "App %(app)s sets default_auto_field = %(pinned)s, which overrides "
                        "DEFAULT_AUTO_FIELD = %(switch)s, so integer keys stay on %(models)s."
                    ),
                    _(
                        "Remove default_auto_field from %(config)s in %(module)s (startapp "
                        'writes it), then run makemigrations (docs: "Migrating"). If the app '
                        'keeps integer keys on purpose, add "django_snowflake.W040" to '
                        "SILENCED_SYSTEM_CHECKS."
                    ),
                    f"{config.__module__}.{config.__qualname__}",
                    {
                        "app": repr(app_config.label),
                        "pinned": repr(app_config.default_auto_field),
                        "models": _join(model.__name__ for model in pinned),
                        "config": config.__qualname__,
                        "module": config.__module__,
                    },
                )
            )
    switch = repr(settings.DEFAULT_AUTO_FIELD)
    return [
        _model_warning("W040", msg, hint, obj, switch=switch, **values)
        for msg, hint, obj, values in overrides
    ]


def check_historical_records(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W043: django-simple-history's historical models keep its integer ``history_id``.

    simple-history declares the key of each historical model itself (``AutoField`` unless
    ``HistoricalRecords(history_id_field=...)`` or ``SIMPLE_HISTORY_HISTORY_ID_USE_UUID``
    says otherwise), so the project cannot remove it as W040 would ask: one warning names
    them all, with the choices there are.
    """
    if not _switched():
        return []
    historical = sorted(
        model._meta.label
        for app_config in app_configs or apps.get_app_configs()
        if not is_installed_package(app_config)
        for model in app_config.get_models()
        if is_historical(model)
        and isinstance(model._meta.pk, AutoField)
        and not isinstance(model._meta.pk, SnowflakeAutoField)
    )
    if not historical:
        return []
    shown = historical[:5]
    more = len(historical) - len(shown)
    return [
        _model_warning(
            "W043",
            _(
                "django-simple-history gives %(count)s historical models an integer "
                "history_id although DEFAULT_AUTO_FIELD is %(switch)s: %(models)s."
            ),
            _(
                "simple-history declares that key itself. Pass "
                "HistoricalRecords(history_id_field=SnowflakeAutoField()) to a model's "
                "history (from django_snowflake.fields), or set "
                "SIMPLE_HISTORY_HISTORY_ID_USE_UUID = True for UUID keys, then run "
                "makemigrations. If integer keys for history rows are fine (nothing else "
                'points at them), add "django_snowflake.W043" to SILENCED_SYSTEM_CHECKS.'
            ),
            "settings.DEFAULT_AUTO_FIELD",
            count=len(historical),
            switch=repr(settings.DEFAULT_AUTO_FIELD),
            models=_join(shown) + (f" (+{more})" if more else ""),
        )
    ]


def check_admin_mixin(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W041: ``SnowflakeAdminMixin`` on a model whose key is not a Snowflake."""
    if not apps.is_installed("django.contrib.admin"):
        return []
    from django.contrib.admin.sites import all_sites

    # Importing django_snowflake.admin registers WorkerNode on the default site, which a
    # project with its own site (or SimpleAdminConfig) must not find there: only an admin
    # that already imported the mixin can use it.
    admin_module = sys.modules.get("django_snowflake.admin")
    if admin_module is None:
        return []
    mixin = admin_module.SnowflakeAdminMixin
    messages: list[CheckMessage] = []
    for admin_site in all_sites:
        registry: Mapping[type[Model], object] = admin_site._registry
        for model, model_admin in registry.items():
            if app_configs is not None and model._meta.app_config not in app_configs:
                continue
            if not isinstance(model_admin, mixin) or is_snowflake_keyed(model):
                continue
            pk = model._meta.pk
            assert pk is not None
            messages.append(
                _model_warning(
                    "W041",
                    _(
                        "%(admin)s uses SnowflakeAdminMixin, but the primary key of %(model)s "
                        "(%(type)s) is not a Snowflake: its created column and filter would "
                        "read every row as created at the epoch."
                    ),
                    _(
                        "Give the model a SnowflakeAutoField or SnowflakeField primary key (an "
                        "app's default_auto_field written by startapp keeps BigAutoField: see "
                        "django_snowflake.W040), or remove SnowflakeAdminMixin from this admin."
                    ),
                    type(model_admin),
                    admin=type(model_admin).__qualname__,
                    model=model._meta.label,
                    type=type(pk).__name__,
                )
            )
    return messages


def _from_taggit(model: type[Model]) -> bool:
    return any(base.__module__.startswith("taggit.") for base in model.__mro__)


def _user_model() -> type[Model] | None:
    try:
        return apps.get_model(settings.AUTH_USER_MODEL)
    except (LookupError, ValueError):
        return None  # auth not installed, or Django's own check reports the setting


def check_generic_relations(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W042: an integer column narrower than the 64-bit keys it holds, where it can tell.

    A ``GenericForeignKey`` may point at any model, so any Snowflake-keyed model puts its
    ``object_id`` at risk. A ``GenericRelation`` on a Snowflake-keyed model holds that model's
    keys, and so do django-taggit's through models, for the models tagged through them only.
    django-simple-history's ``history_user_id_field`` holds keys of ``AUTH_USER_MODEL`` (its
    user getter reads that model). A plain integer column that code fills with some model's
    key says nowhere whose keys it holds, and is not judged.
    """
    checked = (
        apps.get_models()
        if app_configs is None
        else [model for app_config in app_configs for model in app_config.get_models()]
    )
    keyed = [model for model in {*apps.get_models(), *checked} if is_snowflake_keyed(model)]
    if not keyed:
        return []
    keyed.sort(key=lambda model: model._meta.label)
    # (model holding the column, its field name) -> a Snowflake-keyed model whose keys it holds.
    at_risk: dict[tuple[type[Model], str], type[Model]] = {}
    if apps.is_installed("django.contrib.contenttypes"):
        from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation

        for model in checked:
            for field in model._meta.private_fields:
                if isinstance(field, GenericForeignKey) and not _from_taggit(model):
                    at_risk.setdefault((model, field.fk_field), keyed[0])
        # taggit's TaggableManager gives the tagged model a GenericRelation (tagged_items).
        for model in keyed:
            for field in model._meta.private_fields:
                if isinstance(field, GenericRelation):
                    related: Any = field.related_model
                    at_risk.setdefault((related, field.object_id_field_name), model)
    user = _user_model()
    if user is not None and is_snowflake_keyed(user):
        for model in checked:
            if is_historical(model):
                at_risk.setdefault((model, "history_user_id"), user)
    messages: list[CheckMessage] = []
    for (model, name), example in sorted(at_risk.items(), key=lambda item: item[0][0]._meta.label):
        if model not in checked:
            continue
        try:
            column = model._meta.get_field(name)
        except FieldDoesNotExist:
            continue  # Django's own checks report it; simple-history's default is a key
        if column.is_relation or column.get_internal_type() not in NARROW_INTEGER_TYPES:
            continue
        messages.append(_narrow_column(model, name, column, example))
    return messages


def _narrow_column(model: type[Model], name: str, column: Any, example: type[Model]) -> Any:
    """W042 for one column, with the fix its owner can make."""
    if is_historical(model):
        msg = _(
            "%(field)s (%(type)s) holds keys of the user model %(example)s, which are 64-bit "
            "Snowflakes: saving a history row fails with 'integer out of range' on "
            "PostgreSQL and MariaDB."
        )
        hint = _(
            "Give HistoricalRecords(history_user_id_field=models.BigIntegerField(null=True, "
            "blank=True)) instead, and run makemigrations."
        )
    else:
        msg = _(
            "%(field)s (%(type)s) is narrower than the 64-bit keys of Snowflake-keyed "
            "models such as %(example)s that its generic relation can hold: saving one "
            "fails with 'integer out of range' on PostgreSQL and MariaDB."
        )
        if _from_taggit(model):
            hint = _(
                "Tag Snowflake-keyed models through a model of your own, class "
                "TaggedX(CommonGenericTaggedItemBase, TaggedItemBase) with object_id = "
                "models.BigIntegerField(db_index=True), given as TaggableManager(through=...)."
            )
        elif is_installed_package(model._meta.app_config):
            hint = _(
                "The field belongs to the installed app %(app)s, whose models the project "
                "cannot change: keep Snowflake-keyed models out of this relation, or use a "
                "setting of the app that widens the column if it has one. If no "
                'Snowflake-keyed row ever reaches it, add "django_snowflake.W042" to '
                "SILENCED_SYSTEM_CHECKS."
            )
        else:
            hint = _("Make %(field)s a models.PositiveBigIntegerField and run makemigrations.")
    return _model_warning(
        "W042",
        msg,
        hint,
        column,
        field=f"{model._meta.label}.{name}",
        type=column.get_internal_type(),
        example=example._meta.label,
        app=repr(model._meta.app_label),
    )


def _check_copies(alias: str) -> list[CheckMessage]:
    """W052, W053: a PostgreSQL database with functions outside the function schema, or one
    whose ``search_path`` is not pinned."""
    from django.db import connections

    from .vendors import database

    keys = database(connections[alias])
    found, schema = keys.function_copies(), keys.function_schema()
    if not found:
        return []
    repair = _(
        "Run: python manage.py migrate --database=%(alias)s. It keeps the function in "
        "%(schema)s, gives every table that defaults to another copy that one, skips its clock "
        "past theirs and drops them (docs: Schemas and django-tenants)."
    )
    messages = []
    if any(name != schema for name, _ in found):
        messages.append(
            _warning(
                "W052",
                _(
                    "Database %(alias)s has %(count)d django_snowflake_id() functions, in "
                    "schemas %(schemas)s, where SNOWFLAKE['FUNCTION_SCHEMA'] is %(schema)s: "
                    "each has sequences of its own under the database's one slot, so two "
                    "schemas may hold the same key."
                ),
                repair,
                alias=alias,
                count=len(found),
                schemas=_join(name for name, _ in found),
                schema=schema,
            )
        )
    unpinned = [name for name, pinned in found if not pinned]
    if unpinned:
        messages.append(
            _warning(
                "W053",
                _(
                    "The django_snowflake_id() of database %(alias)s in schema %(schemas)s does "
                    "not pin its search_path: sequences of the same names on a caller's "
                    "search_path would be drawn instead of its own."
                ),
                repair,
                alias=alias,
                schemas=_join(unpinned),
                schema=schema,
            )
        )
    return messages


def _keys_switch(alias: str) -> CheckMessage | None:
    """W054: a MariaDB database on another path than ``SNOWFLAKE["MARIADB_KEYS"]`` names."""
    from django.db import connections

    from .vendors import database
    from .vendors.mysql.keys import KEYS

    paths = database(connections[alias]).keys_paths()
    if paths is None or conf.get_settings()["MARIADB_KEYS"] not in KEYS:
        return None
    installed, wanted = paths
    if installed in (None, wanted):
        return None
    return _warning(
        "W054",
        _(
            "The keys of database %(alias)s come from the %(installed)s path, but "
            'SNOWFLAKE["MARIADB_KEYS"] names the %(wanted)s path.'
        ),
        _(
            "Run: python manage.py migrate --database=%(alias)s, which switches the function "
            "and every keyed column's default and trigger."
        ),
        alias=alias,
        installed=installed,
        wanted=wanted,
    )


def check_database_functions(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W050, W051, W058: a database whose Snowflake function has no slot of its own, or one
    it does not hold in the coordination database (a copy of another database's function), or
    a Galera node of it whose function is not its own.
    W052, W053: a PostgreSQL database with more than one function, or an unpinned one.
    W054: a MariaDB database on another path than ``SNOWFLAKE["MARIADB_KEYS"]``.

    Warnings, not errors: ``migrate`` runs the database checks and stops at an error, and
    ``migrate`` of that database is what gives its function a slot of its own.

    A Galera node whose function is not its own (another node's, copied by a state transfer,
    or the refusal of a ``migrate`` that did not reach it) is W058 and nothing else: that
    function refuses every call there, saying to migrate through the node."""
    if databases is None or runtime.settings_errors():
        return []
    from django.db import DatabaseError, connections

    from .database_slots import slot_holder
    from .vendors import database

    coordination = conf.get_settings()["DATABASE"]
    messages: list[CheckMessage] = []
    for alias in databases:
        try:
            messages += _check_copies(alias)
            keys = database(connections[alias])
            exists, slot = keys.function_slot()
            stranger = keys.node_name() if exists and keys.stranger() else None
        except DatabaseError:
            continue  # not reachable or not migrated: nothing to judge
        if not exists:
            continue
        if stranger:
            messages.append(
                _warning(
                    "W058",
                    _(
                        "Galera node %(node)s of database %(alias)s has no Snowflake function "
                        "of its own: every INSERT through it that leaves a Snowflake key out "
                        "fails."
                    ),
                    _(
                        "A migrate through another node did not reach it (it advertises no "
                        "address, wsrep_node_incoming_address = AUTO, or was down or "
                        "unreachable), or a state transfer copied another node's function. "
                        "Run: python manage.py migrate --database=%(alias)s connected to "
                        "this node."
                    ),
                    alias=alias,
                    node=stranger,
                )
            )
            continue
        try:
            switch = _keys_switch(alias)
        except DatabaseError:
            switch = None
        if switch is not None:
            messages.append(switch)
        if slot is None:
            messages.append(
                _warning(
                    "W050",
                    _(
                        "The Snowflake function of database %(alias)s has no worker slot of "
                        "its own: every INSERT that leaves a Snowflake key out fails."
                    ),
                    _(
                        "It was installed before database %(coordination)s had its WorkerNode "
                        "table. Run: python manage.py migrate --database=%(coordination)s, then "
                        "python manage.py migrate --database=%(alias)s."
                    ),
                    alias=alias,
                    coordination=coordination,
                )
            )
            continue
        try:
            holder, own = slot_holder(slot), keys.own_label()
        except DatabaseError:
            continue
        if holder in (None, own):
            continue  # its own, or no row (a test runner's flush): nothing issues under it
        messages.append(
            _warning(
                "W051",
                _(
                    "The Snowflake function of database %(alias)s issues under worker "
                    "slot %(slot)s, which database %(coordination)s records for %(holder)s: "
                    "two issuers of one ID space may make the same keys."
                ),
                _(
                    "The database is a copy of another, or the coordination database lost "
                    "the row. Run: python manage.py migrate --database=%(alias)s, which "
                    "leases a slot of its own for it and installs the function again."
                ),
                alias=alias,
                slot=f"{slot[0]}/{slot[1]}",
                coordination=coordination,
                holder=holder or "nobody",
            )
        )
    return messages
