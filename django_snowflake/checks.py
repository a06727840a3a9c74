"""System checks for ``settings.SNOWFLAKE``, numbered by subject.

E001-E009 bits and layout, E010-E019 epoch and time unit, E020-E029 rollback policy,
E030-E039 allocator, worker and database, E040-E049 fields and models.
"""

from __future__ import annotations

import site
import sysconfig
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from django.apps import AppConfig, apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.core.exceptions import FieldDoesNotExist
from django.db.models import AutoField, Model
from django.utils.module_loading import import_string

from . import conf
from .allocators.base import BaseAllocator
from .allocators.database import DatabaseAllocator
from .allocators.static import (
    HostnameAllocator,
    StaticAllocator,
    current_hostname,
    hostname_ordinal,
)
from .fields import SnowflakeAutoField, SnowflakeField
from .generator import POLICIES
from .layout import MAX_BITS, PRESETS, BitLayout, ms_to_datetime, parse_epoch

OBJ = "settings.SNOWFLAKE"
# JavaScript's Number reads integers exactly only below 2**53: the js_safe layout's promise.
JS_SAFE_BITS = 53
# The database allocator reserves time up to LEASE_SECONDS minus a quarter of it ahead of
# the clock (DatabaseAllocator.margin_ms): milliseconds reserved per second of lease.
RESERVED_MS_PER_LEASE_SECOND = 750
# One minute: a wait beyond it stalls every caller, and a ring window beyond it costs memory.
MAX_ROLLBACK_LIMIT_MS = 60_000


def _error(id: str, msg: str, hint: str) -> Error:
    return Error(msg, hint=hint, obj=OBJ, id=f"django_snowflake.{id}")


def _warning(id: str, msg: str, hint: str) -> Warning:
    return Warning(msg, hint=hint, obj=OBJ, id=f"django_snowflake.{id}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every problem with ``settings.SNOWFLAKE``, as errors and warnings with hints."""
    raw = conf.user_settings()
    if raw is not None and not isinstance(raw, Mapping):
        return [
            _error(
                "E001",
                f"SNOWFLAKE must be a dict, not {type(raw).__name__}.",
                'Write SNOWFLAKE = {"LAYOUT": "twitter", ...}, or remove it for the defaults.',
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
                f"SNOWFLAKE has unknown keys: {', '.join(map(str, unknown))}.",
                f"Known keys are {', '.join(conf.DEFAULTS)}; check the spelling.",
            )
        )
    layout = _check_layout(values, messages)
    _check_policy(values, layout, messages)
    _check_allocator(values, layout, messages)
    return messages


def _check_layout(values: Mapping[str, Any], messages: list[CheckMessage]) -> BitLayout | None:
    errors = len(messages)
    preset = values["LAYOUT"]
    if not isinstance(preset, str) or preset not in PRESETS:
        messages.append(
            _error(
                "E003",
                f"LAYOUT {preset!r} is not a layout preset.",
                f"Choose one of {', '.join(PRESETS)}; set *_BITS keys to adjust it.",
            )
        )
        return None
    arguments = conf.layout_arguments(values)
    for key, argument in conf.LAYOUT_KEYS.items():
        value = arguments[argument]
        if key == "TIME_UNIT_MS":
            if not _is_int(value) or value < 1:
                messages.append(
                    _error(
                        "E012",
                        f"TIME_UNIT_MS must be a positive integer, not {value!r}.",
                        "Use 1 (milliseconds), 10 or 1000 (seconds).",
                    )
                )
        elif not _is_int(value) or value < 0:
            messages.append(
                _error(
                    "E004",
                    f"{key} must be a non-negative integer, not {value!r}.",
                    f"Remove {key} to take the {preset!r} preset's value.",
                )
            )
    if len(messages) > errors:
        return None
    total = sum(arguments[name] for name in conf.LAYOUT_KEYS.values() if name != "time_unit_ms")
    if total > MAX_BITS:
        messages.append(
            _error(
                "E005",
                f"The layout uses {total} bits; at most {MAX_BITS} fit in a signed 64-bit integer.",
                "Lower TIME_BITS, WORKER_BITS or SEQUENCE_BITS until they sum to 63 or less.",
            )
        )
    if arguments["time_bits"] < 1:
        messages.append(
            _error("E006", "TIME_BITS must be at least 1.", "Use 41 bits for ~70 years in ms.")
        )
    try:
        epoch_ms = parse_epoch(values["EPOCH"])
    except (TypeError, ValueError) as exc:
        messages.append(
            _error(
                "E010",
                f"EPOCH is invalid: {exc}.",
                'Use an ISO-8601 string with a time zone ("2025-01-01T00:00:00Z"), an aware '
                "datetime, or integer milliseconds since 1970.",
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
                f"EPOCH {values['EPOCH']!r} is in the future.",
                "Choose an epoch in the past; no ID can be made before it.",
            )
        )
        return layout
    # Compare in ms: with 48+ time bits of 1 ms the end lies past datetime's year 9999.
    end_ms = layout.unit_start_ms(layout.max_time + 1)
    now_ms = now.timestamp() * 1000
    if end_ms <= now_ms:
        end = layout.lifespan_end
        messages.append(
            _error(
                "E013",
                f"The layout's lifespan ended on {end.isoformat()}.",
                "Give TIME_BITS more bits or move EPOCH later, in a new table: the change "
                "reorders existing IDs.",
            )
        )
    elif (end_ms - now_ms) < (end_ms - epoch_ms) / 10:
        end = layout.lifespan_end  # 0.9 of the lifespan is past, so the end is near
        messages.append(
            _warning(
                "W010",
                f"Less than a tenth of the layout's lifespan is left: it ends on "
                f"{end.isoformat()}.",
                "Plan a migration to a layout with more TIME_BITS before then; generation "
                "stops at the end instead of wrapping.",
            )
        )
    return layout


def _js_unsafe(layout: BitLayout) -> Error:
    """E007: the first time unit whose IDs reach 2**53, as a date."""
    first_unsafe = 1 << max(JS_SAFE_BITS - layout.time_shift, 0)
    try:
        when = ms_to_datetime(layout.unit_start_ms(first_unsafe)).isoformat()
    except OverflowError:
        when = "after the year 9999"
    return _error(
        "E007",
        f"LAYOUT 'js_safe' with these bits makes IDs of {layout.total_bits} bits: from {when} "
        f"on they pass 2**{JS_SAFE_BITS}, above which JavaScript rounds integers.",
        f"Keep the bits at {JS_SAFE_BITS} or fewer in all (TIME_BITS, DATACENTER_BITS, "
        "CLOCK_SEQUENCE_BITS, WORKER_BITS, SEQUENCE_BITS), or choose another LAYOUT and send "
        "IDs to browsers as strings.",
    )


def _check_policy(
    values: Mapping[str, Any], layout: BitLayout | None, messages: list[CheckMessage]
) -> None:
    policy = values["CLOCK_ROLLBACK"]
    if policy not in POLICIES:
        messages.append(
            _error(
                "E020",
                f"CLOCK_ROLLBACK {policy!r} is not a rollback policy.",
                f"Choose one of {', '.join(POLICIES)}.",
            )
        )
    bound = values["MAX_ROLLBACK_MS"]
    if not _is_int(bound) or not 0 <= bound <= MAX_ROLLBACK_LIMIT_MS:
        messages.append(
            _error(
                "E021",
                f"MAX_ROLLBACK_MS must be an integer from 0 to {MAX_ROLLBACK_LIMIT_MS}, "
                f"not {bound!r}.",
                "The default, 5 ms, covers NTP slews. A larger bound makes callers wait that "
                "long with the generator locked, and the ring policy keeps a slot per time unit.",
            )
        )
    if policy == "clock_sequence" and layout is not None and layout.clock_sequence_bits == 0:
        messages.append(
            _error(
                "E022",
                "CLOCK_ROLLBACK 'clock_sequence' needs clock-sequence bits, and the layout "
                "has none.",
                "Set CLOCK_SEQUENCE_BITS (e.g. 2) and take as many bits from WORKER_BITS or "
                "SEQUENCE_BITS, or choose another policy.",
            )
        )


def _check_allocator(
    values: Mapping[str, Any], layout: BitLayout | None, messages: list[CheckMessage]
) -> None:
    allocator = values["WORKER_ALLOCATOR"]
    if not isinstance(allocator, str):
        allocator_class = None
    else:
        try:
            allocator_class = import_string(conf.ALLOCATORS.get(allocator, allocator))
        except ImportError:
            allocator_class = None
    if not (
        isinstance(allocator_class, type)
        and issubclass(allocator_class, BaseAllocator)
        and allocator_class is not BaseAllocator
    ):
        messages.append(
            _error(
                "E030",
                f"WORKER_ALLOCATOR {allocator!r} is neither a built-in allocator nor an "
                "importable BaseAllocator subclass.",
                f"Use one of {', '.join(conf.ALLOCATORS)}, or a dotted path to a subclass of "
                "django_snowflake.allocators.base.BaseAllocator.",
            )
        )
    datacenter_id = values["DATACENTER_ID"]
    if layout is not None and not (
        _is_int(datacenter_id) and 0 <= datacenter_id <= layout.max_datacenter_id
    ):
        messages.append(
            _error(
                "E033",
                f"DATACENTER_ID {datacenter_id!r} is outside 0..{layout.max_datacenter_id}.",
                "Set DATACENTER_BITS wide enough, or choose an ID in range.",
            )
        )
    # By class, so the dotted paths of the built-ins are checked too (else build() raises).
    if allocator_class is StaticAllocator:
        _check_static_worker(values, layout, messages)
    elif allocator_class is HostnameAllocator and layout is not None:
        hostname = current_hostname()
        ordinal = hostname_ordinal(hostname)
        if ordinal is None or ordinal > layout.max_worker_id:
            messages.append(
                _error(
                    "E038",
                    f"The host name {hostname!r} has no trailing ordinal in "
                    f"0..{layout.max_worker_id}.",
                    "The hostname allocator reads StatefulSet pod names such as web-3; use "
                    'WORKER_ALLOCATOR = "database" elsewhere.',
                )
            )
    alias = values["DATABASE"]
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        messages.append(
            _error(
                "E034",
                f"DATABASE {alias!r} is not a key of settings.DATABASES.",
                f"Use one of {', '.join(map(repr, settings.DATABASES))}.",
            )
        )
    lease = values["LEASE_SECONDS"]
    if not _is_int(lease) or lease < 3:
        messages.append(
            _error(
                "E035",
                f"LEASE_SECONDS must be an integer of at least 3, not {lease!r}.",
                "The default, 60, renews every 20 seconds.",
            )
        )
    if (
        isinstance(allocator_class, type)
        and issubclass(allocator_class, DatabaseAllocator)
        and layout is not None
        and _is_int(lease)
        and lease >= 3
    ):
        _check_reservation(values, layout, lease, messages)
    label = values["PROCESS_LABEL"]
    if not isinstance(label, str) or len(label) > 100:
        messages.append(
            _error(
                "E036",
                f"PROCESS_LABEL must be a string of at most 100 characters, not {label!r}.",
                'Use a short name such as "web" or "celery".',
            )
        )
    if not isinstance(values["CLAIM_ON_READY"], bool):
        messages.append(
            _error(
                "E037",
                f"CLAIM_ON_READY must be True or False, not {values['CLAIM_ON_READY']!r}.",
                "Leave it False to claim the worker slot at the first ID.",
            )
        )


def _check_reservation(
    values: Mapping[str, Any], layout: BitLayout, lease: int, messages: list[CheckMessage]
) -> None:
    """E014, E023: the database allocator's reservation must leave room for a time unit and
    for what ``borrow`` takes ahead of the clock.

    A lease reserves time units up to three quarters of ``LEASE_SECONDS`` ahead of the
    clock, and the generator issues only below that limit: a unit longer than the
    reservation never gets below it (``generate()`` renews forever and never returns).
    """
    reserved_ms = lease * RESERVED_MS_PER_LEASE_SECOND
    unit = layout.time_unit_ms
    if unit > reserved_ms:
        messages.append(
            _error(
                "E014",
                f"TIME_UNIT_MS {unit} is longer than the {reserved_ms} ms a lease of "
                f"LEASE_SECONDS {lease} reserves ahead (three quarters of it): the database "
                "allocator could never issue an ID.",
                f"Raise LEASE_SECONDS to {-(-unit // RESERVED_MS_PER_LEASE_SECOND)} or more, or "
                f"lower TIME_UNIT_MS to {reserved_ms} or less.",
            )
        )
    bound = values["MAX_ROLLBACK_MS"]
    if values["CLOCK_ROLLBACK"] == "borrow" and _is_int(bound) and bound > reserved_ms:
        messages.append(
            _error(
                "E023",
                f"MAX_ROLLBACK_MS {bound} lets the 'borrow' policy run further ahead of the "
                f"clock than the {reserved_ms} ms a lease of LEASE_SECONDS {lease} reserves "
                "(three quarters of it): IDs would stall at the reservation's end instead of "
                "being borrowed.",
                f"Lower MAX_ROLLBACK_MS to {reserved_ms} or less, or raise LEASE_SECONDS to "
                f"{-(-bound // RESERVED_MS_PER_LEASE_SECOND)} or more.",
            )
        )


def _check_static_worker(
    values: Mapping[str, Any], layout: BitLayout | None, messages: list[CheckMessage]
) -> None:
    worker_id = conf.configured_worker_id(values)
    source = "WORKER_ID" if values["WORKER_ID"] is not None else f"${conf.WORKER_ID_ENV}"
    if worker_id is None:
        messages.append(
            _error(
                "E031",
                "The static allocator needs a worker ID, and none is set.",
                f'Set SNOWFLAKE["WORKER_ID"] or the {conf.WORKER_ID_ENV} environment variable, '
                "different in every process.",
            )
        )
    elif layout is not None and not (_is_int(worker_id) and 0 <= worker_id <= layout.max_worker_id):
        messages.append(
            _error(
                "E032",
                f"The worker ID {worker_id!r} (from {source}) is outside "
                f"0..{layout.max_worker_id}.",
                f"The layout has {layout.worker_bits} worker bits; choose an ID in range.",
            )
        )


def check_worker_table(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """E039: the worker table holds slots claimed under another layout."""
    values = conf.get_settings()
    if databases is None or values["DATABASE"] not in databases or settings_errors():
        return []
    from django.db import DatabaseError

    from .models import WorkerNode

    ours = conf.get_layout().fingerprint
    try:
        theirs = (
            WorkerNode.objects.using(values["DATABASE"])
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
            f"The worker table of database {values['DATABASE']!r} holds slots claimed under "
            f"the layout {theirs}, but the settings describe {ours}.",
            "Restore the SNOWFLAKE layout those IDs were made with. Only if no row of any "
            "table holds an ID of the old layout, delete the old WorkerNode rows.",
        )
    ]


def settings_errors() -> list[str]:
    """The IDs of the errors that keep the settings from building a generator."""
    return [message.id or "" for message in check_settings() if message.is_serious()]


def check_standbys(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W030: the worker table's database streams to asynchronous standbys."""
    values = conf.get_settings()
    if (
        databases is None
        or values["DATABASE"] not in databases
        or values["WORKER_ALLOCATOR"] != "database"
        or settings_errors()
    ):
        return []
    from .allocators.database import asynchronous_standbys

    alias = values["DATABASE"]
    count = asynchronous_standbys(alias)
    if not count:  # none, or the database does not let us see them
        return []
    return [
        _warning(
            "W030",
            f"The database {alias!r}, which holds the worker table, replicates to {count} "
            "asynchronous standby(s): a failover to one may lose the last lease writes.",
            "No ID repeats: after a failover, claims wait LEASE_SECONDS and a quarter before "
            'they issue IDs (docs: "High-availability databases"). To lose no write and skip '
            "that wait, replicate synchronously (synchronous_standby_names, semi-synchronous "
            "replication) at the cost of a round trip per commit; else silence "
            "django_snowflake.W030 in SILENCED_SYSTEM_CHECKS.",
        )
    ]


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


def _model_warning(id: str, msg: str, hint: str, obj: object) -> Warning:
    return Warning(msg, hint=hint, obj=obj, id=f"django_snowflake.{id}")


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


def is_installed_package(app_config: AppConfig) -> bool:
    """Whether the app is Django's or an installed distribution's, not the project's own:
    such apps pin ``default_auto_field`` so that their migrations never follow the project's
    setting, and the project cannot change them."""
    if app_config.name == "django" or app_config.name.startswith("django."):
        return True
    path = Path(app_config.path).resolve()
    return any(path.is_relative_to(directory) for directory in _site_directories())


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
    # (message, hint, object): one per model declaring its key, one per app pinning its own.
    overrides: list[tuple[str, str, object]] = []
    for app_config in app_configs or apps.get_app_configs():
        if app_config.name == "django_snowflake" or is_installed_package(app_config):
            continue
        pinned = []
        for model in app_config.get_models():
            pk: Any = model._meta.pk
            # Other keys (UUID, text, a parent link) are a choice, not a switch that missed.
            # AutoField's isinstance() also holds for BigAutoField and SmallAutoField.
            if not isinstance(pk, AutoField) or isinstance(pk, SnowflakeAutoField):
                continue
            if pk.auto_created:
                pinned.append(model)
                continue
            overrides.append(
                (
                    f"{model._meta.label} declares its primary key {pk.name!r} as "
                    f"{type(pk).__name__}, so it keeps integer keys although "
                    f"DEFAULT_AUTO_FIELD is {settings.DEFAULT_AUTO_FIELD}.",
                    "Remove the field to take DEFAULT_AUTO_FIELD, or declare it as "
                    "SnowflakeAutoField(primary_key=True), then run makemigrations (docs: "
                    '"Migrating"). If the integer key is deliberate, add "django_snowflake.W040" '
                    "to SILENCED_SYSTEM_CHECKS.",
                    model,
                )
            )
        if pinned:
            config = type(app_config)
            names = ", ".join(model.__name__ for model in pinned)
            overrides.append(
                (
                    f"App {app_config.label!r} sets default_auto_field = "
                    f"{app_config.default_auto_field!r}, which overrides DEFAULT_AUTO_FIELD = "
                    f"{settings.DEFAULT_AUTO_FIELD!r}: its models {names} keep integer keys.",
                    f"Remove default_auto_field from {config.__qualname__} in "
                    f"{config.__module__} (startapp writes it), then run makemigrations (docs: "
                    '"Migrating"). If the app keeps integer keys on purpose, add '
                    '"django_snowflake.W040" to SILENCED_SYSTEM_CHECKS.',
                    f"{config.__module__}.{config.__qualname__}",
                )
            )
    return [_model_warning("W040", msg, hint, obj) for msg, hint, obj in overrides]


def check_admin_mixin(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W041: ``SnowflakeAdminMixin`` on a model whose key is not a Snowflake."""
    if not apps.is_installed("django.contrib.admin"):
        return []
    from django.contrib.admin.sites import all_sites

    from .admin import SnowflakeAdminMixin

    messages: list[CheckMessage] = []
    for admin_site in all_sites:
        registry: Mapping[type[Model], object] = admin_site._registry
        for model, model_admin in registry.items():
            if app_configs is not None and model._meta.app_config not in app_configs:
                continue
            if not isinstance(model_admin, SnowflakeAdminMixin) or is_snowflake_keyed(model):
                continue
            pk = model._meta.pk
            assert pk is not None
            messages.append(
                _model_warning(
                    "W041",
                    f"{type(model_admin).__qualname__} uses SnowflakeAdminMixin, but the "
                    f"primary key of {model._meta.label} ({type(pk).__name__}) is not a "
                    "Snowflake: its created column and filter would read every row as "
                    "created at the epoch.",
                    "Give the model a SnowflakeAutoField or SnowflakeField primary key (an "
                    "app's default_auto_field written by startapp keeps BigAutoField: see "
                    "django_snowflake.W040), or remove SnowflakeAdminMixin from this admin.",
                    type(model_admin),
                )
            )
    return messages


def _from_taggit(model: type[Model]) -> bool:
    return any(base.__module__.startswith("taggit.") for base in model.__mro__)


def check_generic_relations(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W042: a generic relation's ``object_id`` narrower than the 64-bit keys it may hold.

    A ``GenericForeignKey`` may point at any model, so any Snowflake-keyed model puts it at
    risk. A ``GenericRelation`` on a Snowflake-keyed model holds that model's keys, and so do
    django-taggit's through models, for the models tagged through them only.
    """
    if not apps.is_installed("django.contrib.contenttypes"):
        return []
    from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation

    checked = (
        apps.get_models()
        if app_configs is None
        else [model for app_config in app_configs for model in app_config.get_models()]
    )
    keyed = [model for model in {*apps.get_models(), *checked} if is_snowflake_keyed(model)]
    if not keyed:
        return []
    keyed.sort(key=lambda model: model._meta.label)
    # (model holding object_id, its field name) -> a Snowflake-keyed model whose keys it holds.
    at_risk: dict[tuple[type[Model], str], type[Model]] = {}
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
    messages: list[CheckMessage] = []
    for (model, name), example in sorted(at_risk.items(), key=lambda item: item[0][0]._meta.label):
        if model not in checked:
            continue
        try:
            object_id = model._meta.get_field(name)
        except FieldDoesNotExist:
            continue  # Django's own checks report it
        kind = object_id.get_internal_type()
        if kind not in NARROW_INTEGER_TYPES:
            continue
        label = f"{model._meta.label}.{name}"
        messages.append(
            _model_warning(
                "W042",
                f"{label} ({kind}) is narrower than the 64-bit keys of Snowflake-keyed models "
                f"such as {example._meta.label} that its generic relation can hold: saving "
                "one fails with 'integer out of range' on PostgreSQL and MariaDB.",
                f"Make {label} a models.PositiveBigIntegerField and run makemigrations. For "
                "django-taggit, tag Snowflake-keyed models through a model of your own, "
                "class TaggedX(CommonGenericTaggedItemBase, TaggedItemBase) with object_id = "
                "models.BigIntegerField(db_index=True), given as TaggableManager(through=...).",
                object_id,
            )
        )
    return messages
