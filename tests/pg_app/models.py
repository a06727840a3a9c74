from __future__ import annotations

from django.contrib.postgres.fields import (
    ArrayField,
    DateTimeRangeField,
    HStoreField,
    IntegerRangeField,
)
from django.db import models

from django_snowflake.models import SnowflakeModel


class PgTwin(SnowflakeModel):
    """Arrays (NULL elements allowed), ranges and hstore, each nullable and not."""

    numbers = ArrayField(models.IntegerField(null=True), default=list)
    maybe_numbers = ArrayField(models.BigIntegerField(), null=True)
    words = ArrayField(models.TextField(null=True), default=list)
    maybe_words = ArrayField(models.CharField(max_length=20, null=True), null=True)
    grid = ArrayField(ArrayField(models.IntegerField()), null=True)
    span = IntegerRangeField(default=None, null=True)
    required_span = IntegerRangeField()
    period = DateTimeRangeField(null=True)
    pairs = HStoreField(default=dict)
    maybe_pairs = HStoreField(null=True)
    days = ArrayField(models.DateField(null=True), null=True)
    amounts = ArrayField(models.DecimalField(max_digits=12, decimal_places=3, null=True), null=True)
    tokens = ArrayField(models.UUIDField(), null=True)
    ratios = ArrayField(models.FloatField(), null=True)
    flags = ArrayField(models.BooleanField(null=True), null=True)
    moments = ArrayField(models.DateTimeField(), null=True)

    class Meta:
        abstract = True


class LoadedPg(PgTwin):
    """Written by bulk_load."""


class CreatedPg(PgTwin):
    """Written by bulk_create."""


class JsonArrayTwin(SnowflakeModel):
    """An array of JSON, which Django sends wrapped in its adapter: text COPY."""

    documents = ArrayField(models.JSONField(null=True), default=list)

    class Meta:
        abstract = True


class LoadedJsonArray(JsonArrayTwin):
    """Written by bulk_load."""


class CreatedJsonArray(JsonArrayTwin):
    """Written by bulk_create."""
