"""The database's own Snowflake function, and the worker slot it issues under.

``InstallDatabaseFunction`` writes ``django_snowflake_id()`` for the layout of the settings
(PostgreSQL, MariaDB; on SQLite each connection registers it). A migration that creates a
``SnowflakeAutoField`` column before this one runs (contrib.auth's many-to-many tables, say)
writes the function first itself, under the slot leased for this database in the
coordination database (until that database has its WorkerNode table, the function refuses).
"""

from django.db import migrations

from django_snowflake.operations import InstallDatabaseFunction


class Migration(migrations.Migration):
    dependencies = [
        ("django_snowflake", "0002_incarnation"),
    ]

    operations = [
        InstallDatabaseFunction(),
    ]
