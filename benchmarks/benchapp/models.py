"""The four primary keys under test, on the same payload: a number and a short text.

The tables are created and dropped by the runner for every load (the app has no
migrations), so each load starts from an empty table, or from a copy of a preloaded one.
"""

from __future__ import annotations

import uuid

from django.db import models

from django_snowflake.fields import SnowflakeField
from django_snowflake.models import SnowflakeModel

from ..baselines import uuid7

# Every model declares its primary key first, as the implicit ``id`` of a model is: the
# order matters, because Model.__init__ pops each field from the keyword arguments while
# any are left, and a missing one (the key) costs a KeyError before its default is called.


class BigAutoRow(models.Model):
    """The implicit ``id`` of ``DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"``."""

    value = models.IntegerField()
    label = models.CharField(max_length=32)

    class Meta:
        db_table = "bench_bigauto"

    def __str__(self) -> str:
        return f"{self.pk}: {self.value}"


class UUID4Row(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    value = models.IntegerField()
    label = models.CharField(max_length=32)

    class Meta:
        db_table = "bench_uuid4"

    def __str__(self) -> str:
        return f"{self.pk}: {self.value}"


class UUID7Row(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7)
    value = models.IntegerField()
    label = models.CharField(max_length=32)

    class Meta:
        db_table = "bench_uuid7"

    def __str__(self) -> str:
        return f"{self.pk}: {self.value}"


class SnowflakeRows(SnowflakeModel):
    """The Snowflake tables' payload: SnowflakeRow, and RawRow for the bare-cursor floor."""

    value = models.IntegerField()
    label = models.CharField(max_length=32)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.pk}: {self.value}"


class SnowflakeRow(SnowflakeRows):
    class Meta:
        db_table = "bench_snowflake"


class RawRow(SnowflakeRows):
    """SnowflakeRow's twin, filled through a bare cursor: the floor under ``create()``."""

    class Meta:
        db_table = "bench_raw"


class BulkLoadRow(SnowflakeRows):
    """SnowflakeRow's twin, filled by ``bulk_load`` (benchmarks/bulk_load.py)."""

    class Meta:
        db_table = "bench_bulk_load"


class BigAutoSnowflakeColumnRow(models.Model):
    """The control: a BigAutoField key plus a Snowflake ID in an ordinary column.

    It pays what SnowflakeRow pays to generate and send an 8-byte value from Python, and what
    BigAutoRow pays for the database's key and RETURNING it.
    """

    value = models.IntegerField()
    label = models.CharField(max_length=32)
    snowflake = SnowflakeField()

    class Meta:
        db_table = "bench_bigauto_snowflake_column"

    def __str__(self) -> str:
        return f"{self.pk}: {self.value}"


#: The models in report order, by the key used in the results.
MODELS: dict[str, type[models.Model]] = {
    "bigauto": BigAutoRow,
    "uuid4": UUID4Row,
    "uuid7": UUID7Row,
    "snowflake": SnowflakeRow,
    "control": BigAutoSnowflakeColumnRow,
    "raw": RawRow,
}
