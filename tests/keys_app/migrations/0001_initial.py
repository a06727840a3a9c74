from django.db import migrations, models

import django_snowflake.fields


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Note",
            fields=[
                (
                    "id",
                    django_snowflake.fields.SnowflakeAutoField(primary_key=True, serialize=False),
                ),
                ("text", models.CharField(max_length=100)),
            ],
        ),
    ]
