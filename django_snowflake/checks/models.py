"""Fields and models: W040-W049, the project's models, apps and admins under the switch."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.apps import AppConfig, apps
from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.checks import CheckMessage, Warning
from django.core.exceptions import FieldDoesNotExist
from django.db.models import AutoField, Model
from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy as _

from ..allocators.base import settings_message
from ..fields import SnowflakeAutoField, SnowflakeField
from .settings import _join

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
