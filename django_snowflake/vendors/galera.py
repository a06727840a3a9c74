"""A Galera cluster: every node has a function of its own (:mod:`.mysql`, ``node``).

Over sequences only that node draws, under a slot of its own (label
``database:<alias>@<wsrep_node_name>``): ``migrate`` through one node installs it on every node
it can reach (:func:`install`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from ..exceptions import SnowflakeError
from ..layout import BitLayout
from . import installed_comment, own_sql
from .base import comment
from .mysql import refusal_sql

logger = logging.getLogger("django_snowflake")


def node_name(connection: BaseDatabaseWrapper) -> str | None:
    """The ``wsrep_node_name`` of the Galera node ``connection`` is on; ``None`` off Galera."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_node_name')"
        )
        variables = {name.lower(): value for name, value in cursor.fetchall()}
    return variables["wsrep_node_name"] if variables.get("wsrep_on") == "ON" else None


def stranger(alias: str) -> bool:
    """Whether the Galera node of database ``alias`` has a function that is not its own:
    another node's, which a state transfer copied there, the refusal of a ``migrate`` that did
    not reach it, or one of a version before the nodes had their own. ``migrate`` through the
    node replaces it."""
    connection = connections[alias]
    if connection.vendor != "mysql":
        return False
    node = node_name(connection)
    found = re.search(r" node=(.*)$", installed_comment(connection) or "")
    return node is not None and (found is None or found.group(1) != node)


def refusal_statement(alias: str, layout: BitLayout) -> str:
    """The function of a Galera node that ``migrate`` did not reach: it refuses, saying what to
    run (replicated to every node, which is why no node lacks the function its triggers call)."""
    return refusal_sql(
        f"{comment(layout, None, alias)} node=",
        f"this Galera node has no Snowflake function of its own: manage.py migrate "
        f"--database={alias} while it is in the cluster",
    )


# The statement before a Galera node's own function, which no other node may have.
LOCAL = "SET SESSION wsrep_on = OFF"


def run(connection: BaseDatabaseWrapper, statements: list[str], execute: Any) -> None:
    """``execute`` each statement; the session replicates again after a Galera node's own
    function, even when a statement failed."""
    try:
        for statement in statements:
            execute(statement)
    finally:
        if LOCAL in statements:
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION wsrep_on = ON")


def peers(
    connection: BaseDatabaseWrapper,
) -> dict[str, tuple[BaseDatabaseWrapper, str | None]]:
    """A connection to each other node of ``connection``'s Galera cluster, by address, and its
    ``wsrep_node_name`` (``None``: it could not be reached). Raises ``SnowflakeError`` when two
    nodes have one name: their functions would draw the same sequences under the same slot."""
    identity = (
        "SELECT @@wsrep_node_name, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
        "WHERE VARIABLE_NAME = 'WSREP_GCOMM_UUID'"
    )
    with connection.cursor() as cursor:
        cursor.execute("SHOW STATUS LIKE 'wsrep_incoming_addresses'")
        row = cursor.fetchone()
        cursor.execute(identity)
        here, me = cursor.fetchone()
    peers: dict[str, tuple[BaseDatabaseWrapper, str | None]] = {}
    try:
        for address in str(row[1] if row else "").split(","):
            host, _, port = address.strip().rpartition(":")
            if not host or not port.isdigit():
                continue  # "AUTO" or empty: a node that does not say where it listens
            options = {"connect_timeout": 5, **connection.settings_dict["OPTIONS"]}
            settings = {**connection.settings_dict, "HOST": host, "PORT": port, "OPTIONS": options}
            peer = type(connection)(settings)
            try:
                with peer.cursor() as cursor:
                    cursor.execute(identity)
                    node, uuid = cursor.fetchone()
            except DatabaseError:
                peers[address] = (peer, None)
                continue
            if uuid == me:
                peer.close()  # the node migrate runs through
            elif node == here or node in [name for _, name in peers.values()]:
                peer.close()
                raise SnowflakeError(
                    f"Two nodes of the Galera cluster are named {node!r} (wsrep_node_name): "
                    "each node's Snowflake function needs a name of its own."
                )
            else:
                peers[address] = (peer, node)
    except BaseException:
        for peer, _node in peers.values():
            peer.close()
        raise
    return peers


def install(editor: BaseDatabaseSchemaEditor, statements: list[str]) -> None:
    """Run ``statements`` (a node's own function: :func:`own_sql`) through ``editor``; then
    install their own on every other node of the cluster that ``migrate`` can reach
    (``wsrep_incoming_addresses``), with the same database settings but that node's address.
    A node it cannot reach keeps its function, or the refusal of the first install; the log
    says which."""
    from ..conf import get_layout

    connection = editor.connection
    others = peers(connection) if not editor.collect_sql else {}
    try:
        run(connection, statements, lambda statement: editor.execute(statement, params=None))
        for address, (peer, node) in others.items():
            if node is not None:
                try:
                    with peer.cursor() as cursor:
                        # The node has applied the refusal of a first install before it
                        # replaces it.
                        cursor.execute("SET SESSION wsrep_sync_wait = 1")
                        cursor.execute("SELECT 1")
                        cursor.execute("SET SESSION wsrep_sync_wait = DEFAULT")
                        run(peer, own_sql(connection, get_layout(), node), cursor.execute)
                    continue
                except DatabaseError:
                    pass
            logger.warning(
                "The Snowflake function of database %r was not installed on Galera node %s: "
                "it keeps the function it has, which refuses unless an earlier migrate "
                "installed its own, until migrate runs through that node.",
                connection.alias,
                node or f"{address} (unreachable)",
            )
    finally:
        for peer, _node in others.values():
            peer.close()
