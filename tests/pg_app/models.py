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

    class Meta:
        abstract = True


class LoadedPg(PgTwin):
    """Written by bulk_load."""


class CreatedPg(PgTwin):
    """Written by bulk_create."""
