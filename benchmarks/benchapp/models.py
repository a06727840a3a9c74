"""The four primary keys under test, on the same payload: a number and a short text.

The tables are created and dropped by the runner for every load (the app has no
migrations), so each load starts from an empty table, or from a copy of a preloaded one.
They take Django's names, ``bench_<model>`` (the app's label is ``bench``).
"""

from __future__ import annotations

import uuid

from django.db import models

from django_snowflake.fields import SnowflakeField
from django_snowflake.models import SnowflakeModel

from ..baselines import uuid7

# Every model has its primary key first, as the implicit ``id`` of a model is: the order
# matters, because Model.__init__ pops each field from the keyword arguments while any are
# left, and a missing one (the key) costs a KeyError before its default is called. Fields
# are ordered by when they were declared, so the keys come from abstract bases declared
# before the payload (SnowflakeModel's is declared in django_snowflake.models).


class UUID4Key(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)

    class Meta:
        abstract = True


class UUID7Key(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7)

    class Meta:
        abstract = True


class Labelled(models.Model):
    """A short text: all the concurrency section's tables hold (the raw SQL inserts it)."""

    label = models.CharField(max_length=32)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.pk}: {self.label}"


class Row(Labelled):
    """The payload of every other table: a number and a short text."""

    value = models.IntegerField()

    class Meta:
        abstract = True


class BigAutoRow(Row):
    """The implicit ``id`` of ``DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"``."""


class UUID4Row(UUID4Key, Row):
    """A random key: UUID version 4."""


class UUID7Row(UUID7Key, Row):
    """A time-ordered UUID key: version 7."""


class SnowflakeRow(SnowflakeModel, Row):
    """A Snowflake key, made in Python."""


class RawRow(SnowflakeModel, Row):
    """SnowflakeRow's twin, filled through a bare cursor: the floor under ``create()``."""


class BulkLoadRow(SnowflakeModel, Row):
    """SnowflakeRow's twin, filled by ``bulk_load`` (benchmarks/bulk_load.py)."""


class BigAutoSnowflakeColumnRow(Row):
    """The control: a BigAutoField key plus a Snowflake ID in an ordinary column.

    It pays what SnowflakeRow pays to generate and send an 8-byte value from Python, and what
    BigAutoRow pays for the database's key and RETURNING it.
    """

    snowflake = SnowflakeField()


#: The models in report order, by the key used in the results.
MODELS: dict[str, type[models.Model]] = {
    "bigauto": BigAutoRow,
    "uuid4": UUID4Row,
    "uuid7": UUID7Row,
    "snowflake": SnowflakeRow,
    "control": BigAutoSnowflakeColumnRow,
    "raw": RawRow,
}


# The concurrency section (benchmarks/concurrency.py): the baselines of the switch's tables in
# benchmarks/switchapp, whose keys are SnowflakeAutoField.


class CreateRow(Labelled):
    """Filled by ``create()`` from concurrent clients: the implicit ``BigAutoField`` key."""


class SqlRow(Labelled):
    """Filled by a raw ``INSERT INTO ... (label)``: ``BIGSERIAL`` / ``AUTO_INCREMENT``."""
