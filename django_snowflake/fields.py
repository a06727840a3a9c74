"""Model fields whose value is a Snowflake ID.

``SnowflakeField`` is generated in Python when the instance is built: it defaults to
:func:`django_snowflake.generate`, a module-level function, so a migration stores a reference
to it rather than a value, historical models in data migrations still get IDs, and Django skips
its UPDATE-before-INSERT probe for new instances. ``SnowflakeAutoField`` is the drop-in for
``AutoField``: the database makes its value at the INSERT (:mod:`django_snowflake.database_keys`).
Neither field reads ``settings.SNOWFLAKE``: changing the settings never produces a migration.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Container, Mapping
from typing import Any

from django import forms
from django.core import checks
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.constants import OnConflict
from django.db.models.fields import NOT_PROVIDED
from django.db.models.options import Options
from django.db.models.signals import class_prepared, pre_save
from django.utils.translation import gettext_lazy as _

from . import decode, generate
from .conf import get_layout
from .database_keys import DatabaseSnowflake, column_default_vendor
from .exceptions import InvalidSnowflake
from .forms import SnowflakeFormField

# Set by SnowflakeAutoField.get_pk_value_on_save() for Model._save_table()'s next question.
_fresh_key: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "django_snowflake_fresh_key", default=False
)

# What SnowflakeAutoField must know of the save or bulk_create that asks it for a key or for
# the fields to read back, to do what AutoField would. Django passes none of it to
# get_pk_value_on_save() or Options.db_returning_fields and offers no hook that does, so
# _django_caller() reads it from the asking function's frame. For each of Django's functions
# that ask (by its code's name): where it is, whose locals hold the options (0: its own, 1:
# its caller's) and which. Django 5.2 to 6.1; tests/test_django_callers.py checks each entry
# against the installed Django's source, and fails naming the function and the local that
# changed.
_DJANGO_CALLERS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    # Model._save_table(self, raw, cls, force_insert, force_update, using, update_fields)
    # calls meta.pk.get_pk_value_on_save(self) for an unset key before it rebinds any of its
    # parameters (force_insert = True comes after, when it skips the UPDATE).
    "_save_table": (
        "django.db.models.base.Model",
        0,
        ("raw", "force_insert", "force_update", "update_fields"),
    ),
    # QuerySet._prepare_for_bulk_create(self, objs) calls get_pk_value_on_save(obj) for each
    # object without a key; it is called by QuerySet.bulk_create(self, objs, batch_size,
    # ignore_conflicts, update_conflicts, update_fields, unique_fields), which holds the options.
    "_prepare_for_bulk_create": (
        "django.db.models.query.QuerySet",
        1,
        ("ignore_conflicts", "update_conflicts"),
    ),
    # QuerySet.bulk_create() reads opts.db_returning_fields after
    # on_conflict = self._check_bulk_create_options(...), to set what the INSERT returned.
    "bulk_create": ("django.db.models.query.QuerySet", 0, ("on_conflict",)),
    # QuerySet._batched_insert(self, objs, fields, batch_size, on_conflict=None, ...) reads
    # self.model._meta.db_returning_fields for the INSERT's RETURNING.
    "_batched_insert": ("django.db.models.query.QuerySet", 0, ("on_conflict",)),
}
_KEY_ASKERS = frozenset({"_save_table", "_prepare_for_bulk_create"})
_UPSERT_READERS = frozenset({"bulk_create", "_batched_insert"})


def _django_caller(names: Container[str]) -> tuple[str, Mapping[str, Any]] | None:
    """The name of the function that called the caller of this one, if it is one of ``names``
    (of :data:`_DJANGO_CALLERS`), and the locals that hold its options (its own or its
    caller's); else ``None``. Read only the locals listed there, with ``.get()``."""
    frame = sys._getframe(2)
    name = frame.f_code.co_name
    if name not in names:
        return None
    # The mapping, not a copy of the locals wanted: copying them made get_pk_value_on_save(),
    # called once per row of a bulk_create, half again as slow.
    if _DJANGO_CALLERS[name][1] and frame.f_back is not None:
        frame = frame.f_back
    return name, frame.f_locals


class _DatabaseKeyDefault:
    """``db_default`` of a Snowflake primary key: ``django_snowflake_id()``, seen only by the
    schema editor while it writes the column (see :mod:`django_snowflake.database_keys`).

    A descriptor on the class, not a value on the field: a copy of the field whose class is
    changed (django-simple-history's historical models turn the key into a plain
    ``BigIntegerField``) keeps whatever ``Field.__init__`` stored, ``NOT_PROVIDED``, so it
    carries no database default and puts nothing of ours into its migrations. At run time
    ``Model.__init__`` and ``save()`` see no database default either: the process makes the
    key (:meth:`SnowflakeAutoField.get_pk_value_on_save`).
    """

    def __get__(self, field: Any, owner: type | None = None) -> Any:
        if field is None:
            return self
        if field.primary_key and field.has_database_default and column_default_vendor() is not None:
            return DatabaseSnowflake()
        return field.__dict__.get("db_default", NOT_PROVIDED)

    def __set__(self, field: Any, value: Any) -> None:
        field.__dict__["db_default"] = value


class _SnowflakeColumnMixin:
    """The value saved and the database's default of a primary key: what both fields share."""

    # As a primary key, the column defaults to the database's function (_DatabaseKeyDefault).
    has_database_default = True
    db_default = _DatabaseKeyDefault()

    def get_db_prep_save(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        # Inserts call this once per row, so an int (what generate() returns) is sent as it
        # is. The generic chain would end in the backend's integer adapter: the identity,
        # except on PostgreSQL with psycopg 3, where it wraps the value in Int8 to pin the
        # parameter's type. That pin matters for lookups (a wider type can defeat an index),
        # which take get_db_prep_value, untouched here. A value being stored needs none: the
        # column is bigint, the bulk path casts its array to bigint[], and PostgreSQL widens
        # whatever smaller integer type psycopg picks. The wrapper made PostgreSQL's
        # bulk_create a tenth slower. Anything but an int takes the full chain, and so does 0,
        # which AutoField refuses on MySQL and MariaDB (validate_autopk_value).
        if value.__class__ is int and value:
            return value
        return super().get_db_prep_save(value, connection)  # type: ignore[misc]


def _fixed_default_error(field: models.Field[Any, Any]) -> checks.CheckMessage:
    return checks.Error(
        f"{type(field).__name__} is a primary key or unique, but its default "
        f"{field.default!r} is not a callable: every new row would get the same value, "
        "or none.",
        hint="Remove default= to use django_snowflake.generate, or pass a function.",
        obj=field,
        id="django_snowflake.E040",
    )


class _SnowflakeDefaultMixin(_SnowflakeColumnMixin):
    """The default, its migration form and its system check."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", generate)
        super().__init__(*args, **kwargs)
        if kwargs["default"] is generate:
            # Model.__init__ calls get_default() for every new instance, and Field's goes
            # through _get_default() to the default: call generate() directly instead, a
            # Python call fewer on the path that builds every row.
            self.get_default = generate

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()  # type: ignore[misc]
        # The default is the field's own: leaving it out keeps migrations short and stable.
        if kwargs.get("default") is generate:
            del kwargs["default"]
        return name, path, args, kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self._check_snowflake_default()]  # type: ignore[misc]

    def _check_snowflake_default(self) -> list[checks.CheckMessage]:
        field: models.Field[Any, Any] = self  # type: ignore[assignment]
        if not (field.primary_key or field.unique):
            return []
        if field.has_default() and callable(field.default):
            return []
        return [_fixed_default_error(field)]


class SnowflakeField(_SnowflakeDefaultMixin, models.BigIntegerField):  # type: ignore[type-arg]
    """A 64-bit integer column holding a Snowflake ID, by default a new one per instance.

    Usable as a primary key (``SnowflakeField(primary_key=True)``, as
    :class:`~django_snowflake.models.SnowflakeModel` does) or as a plain column; foreign keys
    to it are plain ``bigint`` columns. In forms it is a text input (see
    :class:`~django_snowflake.forms.SnowflakeFormField`).
    """

    description = _("Snowflake ID")

    def contribute_to_class(  # type: ignore[override]
        self, cls: type[models.Model], name: str, **kwargs: Any
    ) -> None:
        super().contribute_to_class(cls, name, **kwargs)
        # A model's own _get_unique_checks, if it has one, is left alone.
        if self.primary_key and getattr(cls, _UNIQUE_CHECKS) is getattr(
            models.Model, _UNIQUE_CHECKS
        ):
            setattr(cls, _UNIQUE_CHECKS, _get_unique_checks)

    def formfield(self, **kwargs: Any) -> forms.Field | None:
        # Skip BigIntegerField.formfield(): its min_value/max_value are for number inputs,
        # and an ID is typed and shown as text.
        return models.Field.formfield(self, **{"form_class": SnowflakeFormField, **kwargs})


def _issued_here(field: models.Field[Any, Any], value: object) -> bool:
    """Whether ``value`` is a key this process's generator issued under its current lease."""
    if not isinstance(value, int) or field.default is not generate:
        return False
    from . import get_generator

    generator = get_generator()
    if generator.worker_id is None:
        return False
    try:
        parts = decode(value)
    except InvalidSnowflake:
        return False
    return (parts.worker_id, parts.datacenter_id) == (
        generator.worker_id,
        generator.datacenter_id,
    ) and get_layout().to_units(int(parts.timestamp.timestamp() * 1000)) <= generator.last_timestamp


_UNIQUE_CHECKS = "_get_unique_checks"


def _get_unique_checks(self: models.Model, *args: Any, **kwargs: Any) -> Any:
    """Model._get_unique_checks without the check of a new instance's own fresh key.

    A key this process's generator just issued is unique by construction; checking it would
    cost full_clean() a query per new instance. A key copied from an existing row is still
    checked.
    """
    unique_checks, date_checks = getattr(models.Model, _UNIQUE_CHECKS)(self, *args, **kwargs)
    pk = self._meta.pk
    if self._state.adding and pk is not None and _issued_here(pk, getattr(self, pk.attname)):
        unique_checks = [(model, names) for model, names in unique_checks if names != (pk.name,)]
    return unique_checks, date_checks


def _follow_parent_links(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    """Before a new multi-table child is saved: a parent link given explicitly is the key.

    The parents' SnowflakeField has a default, so Django would force an INSERT of the parent
    row (and, when only the link's id was given, under the key made at instantiation: a second
    parent). With the link's value as the parent's key, and the instance saved as an existing
    one could be (UPDATE, then INSERT), ``Child.objects.create(parent_ptr=parent)``,
    ``Child(parent_ptr_id=parent.pk).save()`` and ``create(pk=4242)`` behave as they do with
    AutoField. A new child without a link keeps its key and its one INSERT per table.
    """
    if kwargs.get("raw") or not instance._state.adding:
        return
    for model in (sender, *sender._meta.get_parent_list()):
        for parent, link in model._meta.parents.items():
            value = None if link is None else instance.__dict__.get(link.attname)
            key = parent._meta.pk
            if value is not None and key is not None:
                setattr(instance, key.attname, value)
                instance._state.adding = False


def _watch_parent_links(sender: type[models.Model], **kwargs: Any) -> None:
    if sender._meta.abstract or not sender._meta.parents:
        return
    if any(
        isinstance(parent._meta.pk, SnowflakeField) and parent._meta.pk.has_default()
        for parent in sender._meta.get_parent_list()
    ):
        pre_save.connect(_follow_parent_links, sender=sender, weak=False)


class_prepared.connect(_watch_parent_links, dispatch_uid="django_snowflake_parent_links")


class SnowflakeAutoField(_SnowflakeColumnMixin, models.BigAutoField):  # type: ignore[type-arg]
    """A ``BigAutoField`` whose values are Snowflake IDs, made by the process at the INSERT.

    Set ``DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"`` (or an
    AppConfig's ``default_auto_field``) to give every model of a project (or an app) Snowflake
    keys. It keeps ``AutoField``'s semantics: the pk is ``None`` until the first save, and
    ``save()`` of an instance built with an existing pk updates that row. Django's own inserts
    (``save()``, ``create()``, ``bulk_create()``, many-to-many rows of models keyed by it) take
    the key from this process's leased worker slot when they insert, with no query; an INSERT
    that leaves the key out (raw SQL, another service) gets one from the database's
    ``django_snowflake_id()`` (see :mod:`django_snowflake.database_keys` and
    docs/architecture.rst). The column is a ``bigint``: no ``AUTOINCREMENT``, identity,
    serial or ``AUTO_INCREMENT``.
    """

    description = _("Snowflake ID (primary key)")
    # The INSERT carries the key the process made: nothing to read back (on MySQL, reading
    # back through LAST_INSERT_ID() would even overwrite it with 0).
    db_returning = False

    def contribute_to_class(  # type: ignore[override]  # the stubs of Field and AutoFieldMixin differ
        self, cls: type[models.Model], name: str, **kwargs: Any
    ) -> None:
        super().contribute_to_class(cls, name, **kwargs)
        if cls.__module__ == "django.db.migrations.recorder":
            # Django's migration recorder (django_migrations) takes DEFAULT_AUTO_FIELD too. It
            # is written by the very first `migrate`, before the function exists, and an
            # existing project's table has an auto-increment int key: it stays a BigAutoField.
            # (Testing whether the model's app is installed instead misjudged the first model
            # of each app in a migration's state, whose app is registered only after its
            # fields: `migrate` made that table an identity column, `sqlmigrate` a bigint.)
            self.has_database_default = False
            self.db_returning = True

    def has_default(self) -> bool:
        # True once, right after get_pk_value_on_save() made a fresh key for a new instance in
        # Model._save_table(): Django then skips its UPDATE probe, one query per new row
        # ("Skip an UPDATE when adding an instance and primary key has a default"). Otherwise
        # False, as AutoField: a key given by the caller, or copied from a parent link, gets
        # the probe, so Model(pk=existing).save() updates that row.
        if _fresh_key.get():
            _fresh_key.set(False)
            return True
        return super().has_default()

    def get_default(self) -> Any:
        # None until the INSERT, as AutoField (Model.__init__ asks every field for it).
        return super().get_default() if self.default is not NOT_PROVIDED else None

    def get_pk_value_on_save(self, instance: models.Model) -> Any:
        """The key of an INSERT that Django makes with this key unset: this process's
        generator makes it (the strong path: a leased slot, fencing, failover incarnations),
        so the INSERT carries it and reads nothing back.

        Django's callers (Django 5.2 to 6.1, read by :func:`_django_caller`, pinned by
        tests/test_django_callers.py and Django's own force_insert_update and bulk_create
        tests) decide what AutoField would do:
        ``Model._save_table()`` asks with ``force_update`` or ``update_fields`` only to raise
        "Cannot force an update in save() with no primary key", so no key is made; a
        ``bulk_create(ignore_conflicts=True)`` cannot tell which rows it stored, so its keys
        are left to the database and unset on the objects, as AutoField leaves them; a
        ``bulk_create(update_conflicts=True)`` leaves them to the database too and reads back
        the key of the row each object inserted or updated (:class:`_UpsertReadBack`).
        """
        if self.default is not NOT_PROVIDED or not self.has_database_default:
            return super().get_pk_value_on_save(instance)
        caller = _django_caller(_KEY_ASKERS)
        if caller is None:
            return generate()
        name, asked = caller
        if name == "_save_table":
            if asked.get("force_update") or asked.get("update_fields"):
                return None
            key = generate()
            # Django consults has_default() next exactly when none of these holds.
            if not (asked.get("raw") or asked.get("force_insert")) and instance._state.adding:
                _fresh_key.set(True)
            return key
        if asked.get("ignore_conflicts") or asked.get("update_conflicts"):
            return None
        return generate()

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # A key given in another type ("123456") is stored as the int the row holds: Django 6
        # reads an AutoField back from the INSERT for that; this one reads nothing back.
        value = getattr(model_instance, self.attname)
        if value is not None and value.__class__ is not int:
            value = self.to_python(value)
            setattr(model_instance, self.attname, value)
        return value

    def get_internal_type(self) -> str:
        # The schema editors decide on AUTOINCREMENT, IDENTITY and AUTO_INCREMENT (and on
        # dropping them when migrating from an AutoField) by the internal type.
        return "BigIntegerField" if self.has_database_default else "BigAutoField"

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        # The default is the field's own, written by the schema editor: migrations omit it.
        kwargs.pop("db_default", None)
        return name, path, args, kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        errors = super().check(**kwargs)
        if self.default is not NOT_PROVIDED and not callable(self.default):
            errors.append(_fixed_default_error(self))
        return errors


class _UpsertReadBack(Options):  # type: ignore[type-arg]
    """The ``_meta`` of a model keyed by SnowflakeAutoField: an upsert reads its keys back.

    ``bulk_create(update_conflicts=True)`` must leave each object with the key of the row it
    inserted or updated, as AutoField does, and only the database knows which row an object
    hit. Django asks for that only for the fields in ``db_returning_fields``, and this key
    is not among them: every other INSERT carries the key the process made and reads nothing
    back (a ``RETURNING`` per row, and on MySQL, which returns nothing, ``LAST_INSERT_ID()``
    would overwrite the key with 0). So the key is added for the two readers of an upsert
    alone, ``QuerySet.bulk_create()`` and ``QuerySet._batched_insert()`` with ``on_conflict``
    ``OnConflict.UPDATE`` (Django 5.2 to 6.1, read by :func:`_django_caller`, pinned by
    tests/test_autofield.py and tests/test_django_callers.py):
    ``get_pk_value_on_save()`` left the objects' keys unset, so Django sends no key, the
    database's function makes the new rows' keys, and ``RETURNING`` gives every object its
    row's key where the backend returns rows from a bulk insert (PostgreSQL, SQLite 3.35+,
    MariaDB). Where it does not (MySQL), the keys stay ``None``, as AutoField's do.
    """

    @property
    def db_returning_fields(self) -> list[Any]:
        # Options caches it in __dict__ (a cached_property), which this property shadows.
        fields: list[Any] = (
            self.__dict__[_RETURNING]
            if _RETURNING in self.__dict__
            else Options.db_returning_fields.__get__(self, Options)
        )
        caller = _django_caller(_UPSERT_READERS)
        if (
            caller is not None
            and caller[1].get("on_conflict") == OnConflict.UPDATE
            and self.pk not in fields
        ):
            return [self.pk, *fields]
        return fields

    @db_returning_fields.deleter
    def db_returning_fields(self) -> None:
        # Options._expire_cache() deletes it (Django 6.1 lists it in FORWARD_PROPERTIES).
        self.__dict__.pop(_RETURNING, None)


_RETURNING = "db_returning_fields"


def _read_back_upserts(sender: type[models.Model], **kwargs: Any) -> None:
    opts = sender._meta
    pk = opts.pk
    # Proxies too: their bulk_create() reads their own _meta. Only Django's own Options is
    # swapped, so a project's subclass of it keeps its class.
    if isinstance(pk, SnowflakeAutoField) and pk.has_database_default and type(opts) is Options:
        opts.__class__ = _UpsertReadBack


class_prepared.connect(_read_back_upserts, dispatch_uid="django_snowflake_upsert_read_back")
