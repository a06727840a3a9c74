"""Django REST framework integration: IDs travel as strings.

JavaScript holds numbers as doubles, exact only below ``2**53``; a Snowflake ID is usually
larger, so a JSON number would be silently rounded by the browser. :class:`SnowflakeField`
writes IDs as strings and reads strings or integers; :class:`SnowflakeModelSerializer` uses it
for Snowflake model fields and for relations to models with Snowflake primary keys.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers
from rest_framework.relations import PrimaryKeyRelatedField
from rest_framework.utils.model_meta import RelationInfo

from . import fields
from .conf import get_layout
from .exceptions import InvalidSnowflake

__all__ = ["SnowflakeField", "SnowflakeModelSerializer", "SnowflakeSerializerMixin"]


class SnowflakeField(serializers.Field):  # type: ignore[type-arg]
    """An ID as a string of digits on output; a string of digits or an integer on input.

    A whole number above the layout's largest ID is a ``ValidationError`` with the
    ``max_value`` code, naming that ID; anything else (floats, booleans, negative numbers,
    text) one with the ``invalid`` code.
    """

    default_error_messages = {
        "invalid": _("A valid ID is a string of up to 19 digits."),
        "max_value": _("This ID is too large (the largest ID is {max_id})."),
    }

    def to_representation(self, value: int) -> str:
        return str(value)

    def to_internal_value(self, data: Any) -> int:
        layout = get_layout()
        if layout.is_too_large(data):
            self.fail("max_value", max_id=str(layout.max_id))
        try:
            return layout.validate(data)
        except InvalidSnowflake:
            self.fail("invalid")


SNOWFLAKE_MODEL_FIELDS = (fields.SnowflakeField, fields.SnowflakeAutoField)


def _has_snowflake_pk(model: type[models.Model]) -> bool:
    return isinstance(model._meta.pk, SNOWFLAKE_MODEL_FIELDS)


class SnowflakeSerializerMixin:
    """For a ``ModelSerializer``: Snowflake fields, and relations to models with Snowflake
    primary keys, are serialized as strings, with no per-field declaration.

    ``class OrderSerializer(SnowflakeSerializerMixin, serializers.HyperlinkedModelSerializer)``
    """

    serializer_field_mapping: ClassVar[
        dict[type[models.Field[Any, Any]], type[serializers.Field]]  # type: ignore[type-arg]
    ] = {
        **serializers.ModelSerializer.serializer_field_mapping,
        **dict.fromkeys(SNOWFLAKE_MODEL_FIELDS, SnowflakeField),
    }

    def build_standard_field(
        self, field_name: str, model_field: models.Field[Any, Any]
    ) -> tuple[type[serializers.Field], dict[str, Any]]:  # type: ignore[type-arg]
        field_class, field_kwargs = super().build_standard_field(  # type: ignore[misc]
            field_name, model_field
        )
        if issubclass(field_class, SnowflakeField):
            # The bigint range of the column, meant for number inputs; the field checks more.
            field_kwargs.pop("min_value", None)
            field_kwargs.pop("max_value", None)
        return field_class, field_kwargs

    def build_relational_field(
        self, field_name: str, relation_info: RelationInfo
    ) -> tuple[type[serializers.Field], dict[str, Any]]:  # type: ignore[type-arg]
        field_class, field_kwargs = super().build_relational_field(  # type: ignore[misc]
            field_name, relation_info
        )
        if issubclass(field_class, PrimaryKeyRelatedField) and _has_snowflake_pk(
            relation_info.related_model
        ):
            field_kwargs.setdefault("pk_field", SnowflakeField())
        return field_class, field_kwargs


class SnowflakeModelSerializer(SnowflakeSerializerMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    """A ``ModelSerializer`` that writes and reads Snowflake IDs as strings."""
