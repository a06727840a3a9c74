"""Model fields whose value is a Snowflake ID, generated in Python when the instance is built.

Both fields default to :func:`django_snowflake.generate`, a module-level function, so a
migration stores a reference to it rather than a value, historical models in data migrations
still get IDs, and Django skips its UPDATE-before-INSERT probe for new instances. Neither
field reads ``settings.SNOWFLAKE``: changing the settings never produces a migration.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core import checks
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.translation import gettext_lazy as _

from . import generate
from .forms import SnowflakeFormField


class _SnowflakeDefaultMixin:
    """The default, its migration form, its system check and the value saved: what both
    fields share."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", generate)
        super().__init__(*args, **kwargs)
        if kwargs["default"] is generate:
            # Model.__init__ calls get_default() for every new instance, and Field's goes
            # through _get_default() to the default: call generate() directly instead, a
            # Python call fewer on the path that builds every row.
            self.get_default = generate

    def get_db_prep_save(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        # Inserts call this once per row, so an int (what generate() returns) is sent as it
        # is. The generic chain would end in the backend's integer adapter: the identity,
        # except on PostgreSQL with psycopg 3, where it wraps the value in Int8 to pin the
        # parameter's type. That pin matters for lookups (a wider type can defeat an index),
        # which take get_db_prep_value, untouched here. A value being stored needs none: the
        # column is bigint, the bulk path casts its array to bigint[], and PostgreSQL widens
        # whatever smaller integer type psycopg picks. The wrapper made PostgreSQL's
        # bulk_create a tenth slower. Anything but an int takes the full chain.
        if value.__class__ is int:
            return value
        return super().get_db_prep_save(value, connection)  # type: ignore[misc]

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
        return [
            checks.Error(
                f"{type(self).__name__} is a primary key or unique, but its default "
                f"{field.default!r} is not a callable: every new row would get the same value, "
                "or none.",
                hint="Remove default= to use django_snowflake.generate, or pass a function.",
                obj=self,
                id="django_snowflake.E040",
            )
        ]


class SnowflakeField(_SnowflakeDefaultMixin, models.BigIntegerField):  # type: ignore[type-arg]
    """A 64-bit integer column holding a Snowflake ID, by default a new one per instance.

    Usable as a primary key (``SnowflakeField(primary_key=True)``, as
    :class:`~django_snowflake.models.SnowflakeModel` does) or as a plain column; foreign keys
    to it are plain ``bigint`` columns. In forms it is a text input (see
    :class:`~django_snowflake.forms.SnowflakeFormField`).
    """

    description = _("Snowflake ID")

    def formfield(self, **kwargs: Any) -> forms.Field | None:
        # Skip BigIntegerField.formfield(): its min_value/max_value are for number inputs,
        # and an ID is typed and shown as text.
        return models.Field.formfield(self, **{"form_class": SnowflakeFormField, **kwargs})


class SnowflakeAutoField(_SnowflakeDefaultMixin, models.BigAutoField):  # type: ignore[type-arg]
    """A ``BigAutoField`` whose value is a Snowflake ID generated in Python, not by the database.

    Set ``DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"`` (or an
    AppConfig's ``default_auto_field``) to give every model of a project (or an app) Snowflake
    keys. The column is a plain ``bigint``: no ``AUTOINCREMENT``, identity, serial or
    ``AUTO_INCREMENT``, and no ``RETURNING`` clause on insert.
    """

    description = _("Snowflake ID (primary key)")
    # The value is known before the INSERT; asking the database for it back is a wasted trip.
    db_returning = False
    _generated_by_database = False

    def contribute_to_class(  # type: ignore[override]  # the stubs of Field and AutoFieldMixin differ
        self, cls: type[models.Model], name: str, **kwargs: Any
    ) -> None:
        super().contribute_to_class(cls, name, **kwargs)
        if cls._meta.app_label not in cls._meta.apps.app_configs:
            # A model outside every installed app takes DEFAULT_AUTO_FIELD too: Django's
            # migration recorder (django_migrations) is one. It is written by the very first
            # `migrate`, before the worker table exists, and an existing project's table has
            # an auto-increment int key: it stays a BigAutoField, numbered by the database.
            self._generated_by_database = True
            self.default = models.NOT_PROVIDED
            del self.get_default
            self.db_returning = True

    def get_internal_type(self) -> str:
        # The schema editors decide on AUTOINCREMENT, IDENTITY and AUTO_INCREMENT (and on
        # dropping them when migrating from an AutoField) by the internal type.
        return "BigAutoField" if self._generated_by_database else "BigIntegerField"
