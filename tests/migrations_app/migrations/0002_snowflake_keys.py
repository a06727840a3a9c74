# What makemigrations writes after Parent becomes a SnowflakeModel and the app's
# default_auto_field becomes SnowflakeAutoField (docs/migrating.rst). The foreign key column
# follows the primary key's new type by itself.
from django.db import migrations

import django_snowflake.fields


class Migration(migrations.Migration):
    dependencies = [("migrations_app", "0001_initial")]

    operations = [
        migrations.AlterField(
            model_name="parent",
            name="id",
            field=django_snowflake.fields.SnowflakeField(
                editable=False, primary_key=True, serialize=False, verbose_name="ID"
            ),
        ),
        migrations.AlterField(
            model_name="child",
            name="id",
            field=django_snowflake.fields.SnowflakeAutoField(
                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
            ),
        ),
    ]
