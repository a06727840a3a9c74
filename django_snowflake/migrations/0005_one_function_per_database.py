"""One Snowflake function per PostgreSQL database, in ``SNOWFLAKE["FUNCTION_SCHEMA"]``.

Before this migration, the package installed ``django_snowflake_id()`` and its sequences in every schema a
``migrate`` ran in (django-tenants' tenant schemas, a ``search_path`` in ``OPTIONS``), each
issuing under the database's one slot: two schemas could hold the same key. The copies outside
the function schema are dropped, after the tables that default to them are repointed and the
surviving function's clock has skipped past theirs. Nothing happens on other databases, nor on a
database with one function.
"""

from django.db import migrations

from django_snowflake.operations import RepairDatabaseFunctions


class Migration(migrations.Migration):
    dependencies = [
        ("django_snowflake", "0004_database_slots"),
    ]

    operations = [
        RepairDatabaseFunctions(),
    ]
