"""The database's own Snowflake function, and the worker slot it issues under.

``InstallDatabaseFunction`` writes ``django_snowflake_id()`` for the layout of the settings
(PostgreSQL, MariaDB; on SQLite each connection registers it). A migration that creates a
``SnowflakeAutoField`` column before this one runs (contrib.auth's many-to-many tables, say)
writes the function first itself. The claim leases the slot; until it runs, the function
refuses to issue.
"""

from django.db import migrations

from django_snowflake.database_keys import InstallDatabaseFunction, claim_operation


class Migration(migrations.Migration):
    dependencies = [
        ("django_snowflake", "0002_incarnation"),
    ]

    operations = [
        InstallDatabaseFunction(),
        claim_operation(),
    ]
