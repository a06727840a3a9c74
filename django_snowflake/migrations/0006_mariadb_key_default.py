"""MariaDB's keys from a column default over one sequence (issue 26).

An INSERT that leaves the key out of a Snowflake-keyed table gets it from the column's
``DEFAULT``, an expression over one sequence of the database that the processes' heartbeats
move with the clock, instead of a trigger calling the function, which taxed every INSERT into
the table, Django's own too. ``SNOWFLAKE["MARIADB_KEYS"] = "trigger"`` keeps the trigger; a
later change of the setting is applied by ``migrate`` (its ``post_migrate``), with no
migration. Nothing on PostgreSQL and SQLite.
"""

from django.db import migrations

from django_snowflake.operations import SwitchMariaDBKeys


class Migration(migrations.Migration):
    dependencies = [
        ("django_snowflake", "0005_one_function_per_database"),
    ]

    operations = [
        SwitchMariaDBKeys(),
    ]
