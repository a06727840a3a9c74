"""One worker slot per database, and the database's default on every Snowflake primary key.

The function is installed again under a slot leased for this database alone (``database:<alias>``
in the coordination database's ``WorkerNode``), replacing the one slot every database shared,
with its new algorithm (no lock queue on PostgreSQL, failover skip). Tables made before
``SnowflakeField`` primary keys had a database default get it, so an INSERT that leaves the key
out works on every Snowflake-keyed table.
"""

from django.db import migrations

from django_snowflake.operations import AddDatabaseDefaults, InstallDatabaseFunction


class Migration(migrations.Migration):
    dependencies = [
        ("django_snowflake", "0003_database_keys"),
    ]

    operations = [
        InstallDatabaseFunction(),
        AddDatabaseDefaults(),
    ]
