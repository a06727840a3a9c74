"""The concurrency section's Snowflake tables: benchapp's ``CreateRow`` and ``SqlRow`` under
the switch (the app's ``default_auto_field`` is ``SnowflakeAutoField``).

Created and dropped by the runner (no migrations), as Django's schema editor creates them:
with the database's key function as the column's default (PostgreSQL) or trigger (MariaDB).
"""

from __future__ import annotations

from ..benchapp.models import Labelled


class CreateRow(Labelled):
    """Filled by ``create()`` from concurrent clients: the key is the switch's."""


class SqlRow(Labelled):
    """Filled by a raw ``INSERT INTO ... (label)``: the key is the database function's."""
