"""What every database's own key generator shares: its name, its bounds, its comment."""

from __future__ import annotations

import math
import re
from typing import Any

from ..layout import BitLayout

FUNCTION = "django_snowflake_id"
# What the function's comment says, read back by the checks: "slot=W/D" or "slot=none"; a
# Galera node's function says "node=<wsrep_node_name>" too.
COMMENT = re.compile(r"slot=(?:(\d+)/(\d+)|none)")


def is_database_keyed(field: Any) -> bool:
    """Whether the database makes ``field``'s key when an INSERT leaves it out: a Snowflake
    primary key (a copy whose class was changed has not the attribute)."""
    return getattr(field, "has_database_default", False) is True and field.primary_key


def lead_units(layout: BitLayout) -> int:
    """How far (layout units) a burst may run the function ahead of its last catch-up:
    a second, and at least one unit."""
    return max(1, math.ceil(1000 / layout.time_unit_ms))


def hold_units(layout: BitLayout) -> int:
    """How far past the replayed clock a new incarnation skips: ``LEASE_SECONDS``."""
    from ..conf import get_settings

    return math.ceil(float(get_settings()["LEASE_SECONDS"]) * 1000 / layout.time_unit_ms)


def refusal(alias: str) -> str:
    # Short enough for MariaDB's MESSAGE_TEXT (128 characters) with a usual alias.
    return (
        f"database {alias!r} has no Snowflake worker slot of its own: "
        f"manage.py migrate --database={alias} (after the coordination database)"
    )


def comment(
    layout: BitLayout, slot: tuple[int, int] | None, alias: str, node: str | None = None
) -> str:
    where = "none" if slot is None else f"{slot[0]}/{slot[1]}"
    comment = f"django_snowflake layout={layout.fingerprint} slot={where} database={alias}"
    return comment if node is None else f"{comment} node={node}".replace("'", "''")
