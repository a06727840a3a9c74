"""Each database's own key generator, ``django_snowflake_id()``: a module per vendor.

The modules have the same names, as Django's ``db/backends/<vendor>/`` do: ``install_sql``
(the function for a layout and a slot), ``installed_comment_sql`` (how the checks find it),
``COLUMN_SQL`` and ``plain_bigint`` (whether a column may take the key), ``key_default_sql``
and ``key_changed_sql`` (what a keyed column needs). :mod:`.galera` is a variant of
:mod:`.mysql`; :mod:`.sqlite` registers the process's generator on each connection instead.
Which insert takes which path is decided in :mod:`django_snowflake.database_keys`.
"""

from __future__ import annotations

from types import ModuleType

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..database_slots import lease_database_slot
from ..layout import BitLayout
from . import mysql, postgresql
from .base import COMMENT

SERVERS: dict[str, ModuleType] = {"postgresql": postgresql, "mysql": mysql}


def install_sql(
    vendor: str,
    layout: BitLayout,
    slot: tuple[int, int] | None,
    *,
    alias: str = "default",
    node: str | None = None,
) -> list[str]:
    """The statements that create (or replace) the function on ``vendor``; ``[]`` on SQLite.

    They embed ``layout`` and the database's ``slot`` (``None``: the function refuses, naming
    ``alias``) and are idempotent, so every migration that creates a Snowflake column may run
    them first. With ``node`` (MariaDB), they are Galera node ``node``'s own, run on it.
    """
    if vendor not in SERVERS:
        return []
    statements: list[str] = SERVERS[vendor].install_sql(layout, slot, alias=alias, node=node)
    return statements


def own_sql(connection: BaseDatabaseWrapper, layout: BitLayout, node: str | None) -> list[str]:
    """:func:`install_sql` for ``connection`` (its Galera node ``node``) under its leased slot;
    on PostgreSQL, the slot its function already has if the worker table it reads records that
    slot for nobody (see :func:`lease_database_slot`)."""
    keep = function_slot(connection)[1] if connection.vendor == "postgresql" else None
    slot = lease_database_slot(connection.alias, layout, node, keep)
    return install_sql(connection.vendor, layout, slot, alias=connection.alias, node=node)


def installed_comment(connection: BaseDatabaseWrapper) -> str | None:
    """The comment of the function installed on ``connection`` (``""`` without one);
    ``None`` when it has no function."""
    if connection.vendor not in SERVERS:
        return None
    with connection.cursor() as cursor:
        cursor.execute(*SERVERS[connection.vendor].installed_comment_sql())
        row = cursor.fetchone()
    return None if row is None else str(row[0] or "")


def installed_slot(alias: str) -> tuple[bool, tuple[int, int] | None]:
    """Whether database ``alias`` has the function, and the slot its comment names."""
    return function_slot(connections[alias])


def function_slot(connection: BaseDatabaseWrapper) -> tuple[bool, tuple[int, int] | None]:
    """:func:`installed_slot` of ``connection``'s database."""
    comment = installed_comment(connection)
    if comment is None:
        return False, None
    listed = mysql.galera_nodes(comment)
    if listed is not None:  # a Galera cluster's one function: the slot of this node
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@wsrep_node_name")
            (node,) = cursor.fetchone()
        comment = f"slot={listed.get(mysql.node_key(node), 'none')}"
    found = COMMENT.search(comment)
    if found is None or found.group(1) is None:
        return True, None
    return True, (int(found.group(1)), int(found.group(2)))
