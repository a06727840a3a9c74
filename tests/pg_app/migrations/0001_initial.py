import django.contrib.postgres.fields
import django.contrib.postgres.fields.hstore
import django.contrib.postgres.fields.ranges
from django.contrib.postgres.operations import HStoreExtension
from django.db import migrations, models

import django_snowflake.fields


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        HStoreExtension(),
        migrations.CreateModel(
            name="CreatedPg",
            fields=[
                (
                    "id",
                    django_snowflake.fields.SnowflakeField(
                        editable=False, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "numbers",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.IntegerField(null=True), default=list, size=None
                    ),
                ),
                (
                    "maybe_numbers",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), null=True, size=None
                    ),
                ),
                (
                    "words",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(null=True), default=list, size=None
                    ),
                ),
                (
                    "maybe_words",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=20, null=True), null=True, size=None
                    ),
                ),
                (
                    "grid",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=django.contrib.postgres.fields.ArrayField(
                            base_field=models.IntegerField(), size=None
                        ),
                        null=True,
                        size=None,
                    ),
                ),
                (
                    "span",
                    django.contrib.postgres.fields.ranges.IntegerRangeField(
                        default=None, null=True
                    ),
                ),
                ("required_span", django.contrib.postgres.fields.ranges.IntegerRangeField()),
                ("period", django.contrib.postgres.fields.ranges.DateTimeRangeField(null=True)),
                ("pairs", django.contrib.postgres.fields.hstore.HStoreField(default=dict)),
                ("maybe_pairs", django.contrib.postgres.fields.hstore.HStoreField(null=True)),
            ],
            options={
                "abstract": False,
            },
        ),
        migrations.CreateModel(
            name="LoadedPg",
            fields=[
                (
                    "id",
                    django_snowflake.fields.SnowflakeField(
                        editable=False, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "numbers",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.IntegerField(null=True), default=list, size=None
                    ),
                ),
                (
                    "maybe_numbers",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), null=True, size=None
                    ),
                ),
                (
                    "words",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(null=True), default=list, size=None
                    ),
                ),
                (
                    "maybe_words",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=20, null=True), null=True, size=None
                    ),
                ),
                (
                    "grid",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=django.contrib.postgres.fields.ArrayField(
                            base_field=models.IntegerField(), size=None
                        ),
                        null=True,
                        size=None,
                    ),
                ),
                (
                    "span",
                    django.contrib.postgres.fields.ranges.IntegerRangeField(
                        default=None, null=True
                    ),
                ),
                ("required_span", django.contrib.postgres.fields.ranges.IntegerRangeField()),
                ("period", django.contrib.postgres.fields.ranges.DateTimeRangeField(null=True)),
                ("pairs", django.contrib.postgres.fields.hstore.HStoreField(default=dict)),
                ("maybe_pairs", django.contrib.postgres.fields.hstore.HStoreField(null=True)),
            ],
            options={
                "abstract": False,
            },
        ),
    ]
