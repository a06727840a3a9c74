"""A Galera cluster: every node draws keys from sequences only it draws, under a slot of its
own (label ``database:<alias>@<wsrep_node_name>``).

On the column-default path (:func:`default_sql`), one ``migrate`` through any node serves every
node the cluster names: the keyed columns' ``DEFAULT`` and the one function choose the node's
sequence by ``@@wsrep_node_name``, all replicated. On the trigger path every node has a function
of its own (:mod:`.mysql`, ``node``): ``migrate`` through one node installs it on every node it
can reach (:meth:`Galera.install`).

**A Galera cluster** draws, on each node, sequences only that node draws, under the node's own
slot. On the column-default path the ``DEFAULT`` and the one function choose them by
``@@wsrep_node_name`` (:func:`galera_key_expression`), each node's sequence moved by its own
heartbeats (:class:`KeyClock`). On the trigger path, below, each node
(``node``) gets a clock of its own: the same function over sequences named after it (``django_snowflake_id_<node>_counter``...), under a slot of its own. Galera neither
certifies nor serialises a sequence's draws across nodes (one sequence drawn on two nodes at
once repeats values) and ``GET_LOCK`` is a node's own, but a sequence only one node draws is
safe: its draws replicate as row images to the others, so a node that rejoins by a state
transfer gets its clock back. The sequences are created cluster-wide (replicated DDL); the
function is created on that node alone (``wsrep_on`` off for the statement), since each node's
names its own sequences and slot. A state transfer (SST) copies the donor's whole datadir,
its function included: a function refuses on any node but its own, and the node's incarnation
is its name and ``wsrep_gcomm_uuid`` (new at every start), so after a crash and rejoin the
node skips its clock past the keys it issued whose draws were not replicated, as a failover.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from ..database_slots import database_label, labelled_slots, lease_database_slot
from ..exceptions import SnowflakeError
from ..layout import BitLayout
from .base import COMMENT, Database, comment, lead_units
from .mysql import MariaDB, keys_setting
from .mysql.keys import (
    KEYS_DEFAULT,
    galera_key_expression,
    galera_key_sql,
    galera_nodes,
    node_key,
)
from .mysql.trigger import refusal_sql

logger = logging.getLogger("django_snowflake")


def node_name(connection: BaseDatabaseWrapper) -> str | None:
    """The ``wsrep_node_name`` of the Galera node ``connection`` is on; ``None`` off Galera."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_node_name')"
        )
        variables = {name.lower(): value for name, value in cursor.fetchall()}
    return variables["wsrep_node_name"] if variables.get("wsrep_on") == "ON" else None


def _served(comment: str | None, node: str) -> bool:
    """Whether the function with ``comment`` gives keys of its own on ``node``."""
    listed = galera_nodes(comment)
    if listed is not None:
        return node_key(node) in listed
    found = re.search(r" node=(.*)$", comment or "")
    return found is not None and found.group(1) == node


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


@dataclasses.dataclass
class Peer:
    """Another node of the cluster, as ``migrate`` through one node sees it."""

    #: Its ``wsrep_node_name`` (its address while its name is not known).
    name: str
    #: Its ``wsrep_node_incoming_address``: where clients reach it (``AUTO``: it does not say).
    address: str
    #: A connection to it, ``None`` when it has no address or could not be reached.
    connection: BaseDatabaseWrapper | None = None
    #: Why there is no connection.
    reason: str = ""

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


_IDENTITY = (
    "SELECT @@wsrep_node_name, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME = 'WSREP_GCOMM_UUID'"
)


def _members(cursor: Any) -> list[tuple[str | None, str, str | None]]:
    """(name, incoming address, gcomm uuid) of every node in the cluster: from
    ``mysql.wsrep_cluster_members`` (which knows the names of nodes that advertise no
    address), else from ``wsrep_incoming_addresses`` (addresses only)."""
    try:
        cursor.execute(
            "SELECT node_name, node_incoming_address, node_uuid FROM mysql.wsrep_cluster_members"
        )
        return [(name, address, uuid) for name, address, uuid in cursor.fetchall()]
    except DatabaseError:
        cursor.execute("SHOW STATUS LIKE 'wsrep_incoming_addresses'")
        row = cursor.fetchone()
        addresses = str(row[1] if row else "").split(",")
        return [(None, address.strip(), None) for address in addresses if address.strip()]


def peers(connection: BaseDatabaseWrapper) -> list[Peer]:
    """Every other node of ``connection``'s Galera cluster, connected where it can be. Raises
    ``SnowflakeError`` when two nodes have one name: their functions would draw the same
    sequences under the same slot."""
    with connection.cursor() as cursor:
        cursor.execute(_IDENTITY)
        here, me = cursor.fetchone()
        members = _members(cursor)
    found: list[Peer] = []
    names = [here]
    try:
        for name, address, uuid in members:
            if uuid == me:
                continue  # the node migrate runs through
            peer = Peer(name or address, address)
            found.append(peer)
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                peer.reason = (
                    f"it does not advertise where clients reach it "
                    f"(wsrep_node_incoming_address = {address or 'empty'})"
                )
            else:
                options = {"connect_timeout": 5, **connection.settings_dict["OPTIONS"]}
                settings = {
                    **connection.settings_dict, "HOST": host, "PORT": port, "OPTIONS": options
                }  # fmt: skip
                peer.connection = type(connection)(settings)
                try:
                    with peer.connection.cursor() as cursor:
                        cursor.execute(_IDENTITY)
                        peer.name, uuid = cursor.fetchone()
                except DatabaseError as exc:
                    peer.close()
                    peer.connection, peer.reason = None, f"unreachable at {address}: {exc}"
                    continue
                if uuid == me:  # the node migrate runs through, by another address
                    peer.close()
                    found.pop()
                    continue
            if peer.name in names:
                raise SnowflakeError(
                    f"Two nodes of the Galera cluster are named {peer.name!r} "
                    "(wsrep_node_name): each node's Snowflake function needs a name of its own."
                )
            names.append(peer.name)
    except BaseException:
        for peer in found:
            peer.close()
        raise
    return found


class Galera(MariaDB):
    """A node of a Galera cluster: MariaDB, with what is per node (its name, its keys' slot
    and sequence, the other nodes ``migrate`` serves, the cluster's incarnation)."""

    def __init__(self, connection: BaseDatabaseWrapper, node: str) -> None:
        super().__init__(connection)
        #: This node's ``wsrep_node_name``.
        self.node = node

    @classmethod
    def for_connection(cls, connection: BaseDatabaseWrapper) -> Database:
        node = node_name(connection)
        return MariaDB.for_connection(connection) if node is None else cls(connection, node)

    def node_name(self) -> str | None:
        return self.node

    def where(self) -> str:
        return f"node {self.node}"

    def _column_default_path(self) -> bool:
        return keys_setting() == KEYS_DEFAULT

    def function_sql(self) -> list[str]:
        """On the column-default path, every node's (:meth:`default_sql`); on the trigger
        path, this node's own (:meth:`install` installs the other nodes')."""
        from ..conf import get_layout

        layout = get_layout()
        if self._column_default_path():
            return self.default_sql(layout)
        statements = self.own_sql(layout, self.node)
        if "node=" not in (self.installed_comment() or ""):
            # The first install on the cluster: every node gets a function that refuses,
            # saying what to run, before the nodes migrate reaches get their own.
            statements.insert(0, refusal_statement(self.alias, layout))
        return statements

    def key_default(self) -> str | None:
        from ..conf import get_layout

        if not self._column_default_path():
            return "0"
        layout = get_layout()
        return galera_key_expression(layout, self.key_slots(layout))

    def function_slot(self) -> tuple[bool, tuple[int, int] | None]:
        comment = self.installed_comment()
        if comment is None:
            return False, None
        listed = galera_nodes(comment)
        if listed is not None:  # the cluster's one function: the slot of this node
            comment = f"slot={listed.get(node_key(self.node), 'none')}"
        found = COMMENT.search(comment)
        if found is None or found.group(1) is None:
            return True, None
        return True, (int(found.group(1)), int(found.group(2)))

    def incarnation(self) -> tuple[str, bool]:
        """The cluster's state UUID, the same on every node.

        Every node of a cluster has every committed write, so the state UUID names the history
        whichever node answers: moving between nodes is no failover. A cluster bootstrapped
        anew from a node that recovered no position (every node crashed) starts another
        history, with another UUID; one bootstrapped from a node that kept its position keeps
        it, even when that node missed writes (docs: "High-availability databases", Galera).
        """
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT @@gtid_slave_pos")
            (replicated,) = cursor.fetchone()
            cursor.execute("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_state_uuid'")
            status = cursor.fetchone()
        if status is None or not status[1]:
            return super().incarnation()
        return f"galera:{status[1]}", not replicated

    def after_conflict(self) -> None:
        """Before a renewal runs again after a certification conflict: wait until this node
        has applied every write the cluster committed before it, so it sees the other one."""
        with self.connection.cursor() as cursor:
            cursor.execute("SET SESSION wsrep_sync_wait = 3")

    def stranger(self) -> bool:
        """Whether the Galera node of database ``alias`` has no keys of its own: on the trigger
        path a function that is not its own (another node's, which a state transfer copied there,
        the refusal of a ``migrate`` that did not reach it, or one of a version before the nodes
        had their own); on the column-default path, a node the keys' expression does not name (it
        joined after the last ``migrate``). ``migrate`` through the node gives it its own."""
        return not _served(self.installed_comment(), self.node)

    def unserved(self) -> bool:
        """Whether the cluster's column-default keys leave out a node of the cluster (one that
        was down, or not yet a member, at the last ``migrate``); ``False`` off that path."""
        listed = galera_nodes(self.installed_comment())
        if listed is None:
            return False
        with self.connection.cursor() as cursor:
            names = [name for name, _address, _uuid in _members(cursor) if name]
        return any(node_key(name) not in listed for name in names)

    def member_names(self) -> list[str]:
        """The ``wsrep_node_name`` of every node of ``connection``'s cluster whose name is known,
        this node's first: read on each node ``migrate`` can reach (so that two nodes of one name,
        which would draw one sequence under one slot, stop it, as :func:`peers` says), else as
        ``mysql.wsrep_cluster_members`` names it."""
        others = peers(self.connection)
        try:
            named = [peer.name for peer in others if peer.name != peer.address]
        finally:
            for peer in others:
                peer.close()
        return [self.node, *sorted(named)]

    def key_slots(self, layout: BitLayout) -> dict[str, Any]:
        """Every node's slot, by name: leased for each node of the cluster."""
        return {name: lease_database_slot(self.alias, layout, name) for name in self.member_names()}

    def default_sql(self, layout: BitLayout) -> list[str]:
        """The column-default path of the cluster (:func:`.mysql.keys.galera_key_sql`):
        every node it names served from this one ``migrate``. The sequences set are this node's,
        those of nodes not served before (or served without a slot, which draw none), and all of
        them when the cluster leaves the trigger path (no node draws them then)."""
        slots = self.key_slots(layout)
        here = next(iter(slots))
        served = galera_nodes(self.installed_comment())
        moving = {
            name for name in slots if served is None or served.get(node_key(name), "none") == "none"
        }
        with self.connection.cursor() as cursor:
            runs = {name: uuid for name, _, uuid in _members(cursor) if name and uuid}
        return galera_key_sql(
            layout,
            slots,
            here=here,
            moving=moving | {here},
            runs=runs,
            lead_units=lead_units(layout),
            comment=comment(layout, slots[here], self.alias, None),
        )

    def install(self, editor: BaseDatabaseSchemaEditor) -> None:
        """On the column-default path, run :meth:`function_sql` through ``editor`` (replicated to
        every node). On the trigger path, run this node's own function through ``editor``; then
        install their own on every other node of the cluster that ``migrate`` can reach, with the
        same database settings but that node's incoming address. A node it cannot address
        (``wsrep_node_incoming_address = AUTO``) or reach keeps its function, or the refusal of
        the first install, until ``migrate`` runs through it; the log names each node and says
        what was done there."""
        from ..conf import get_layout

        statements = self.function_sql()
        if LOCAL not in statements:
            super().install(editor)
            self.install_ticks(editor)
            return
        # The trigger's function follows the clock itself: no node keeps an event.
        self.install_tick(lambda statement: editor.execute(statement, params=None))
        connection = editor.connection
        alias = connection.alias
        others = peers(connection) if not editor.collect_sql else []
        try:
            run(connection, statements, lambda statement: editor.execute(statement, params=None))
            if not editor.collect_sql:
                logger.info(
                    "The Snowflake function of database %r was installed on Galera node %s "
                    "(migrate runs through it).",
                    alias,
                    self.node,
                )
            for peer in others:
                if peer.connection is not None:
                    try:
                        with peer.connection.cursor() as cursor:
                            # The node has applied the refusal of a first install before it
                            # replaces it.
                            cursor.execute("SET SESSION wsrep_sync_wait = 1")
                            cursor.execute("SELECT 1")
                            cursor.execute("SET SESSION wsrep_sync_wait = DEFAULT")
                            own = self.own_sql(get_layout(), peer.name)
                            run(peer.connection, own, cursor.execute)
                    except DatabaseError as exc:
                        peer.reason = f"the install failed there: {exc}"
                    else:
                        logger.info(
                            "The Snowflake function of database %r was installed on Galera node "
                            "%s (at %s).",
                            alias,
                            peer.name,
                            peer.address,
                        )
                        continue
                logger.warning(
                    "The Snowflake function of database %r was NOT installed on Galera node %s: "
                    "%s. Until it is, every INSERT through that node that leaves a Snowflake key "
                    "out fails. Run python manage.py migrate --database=%s connected to that node "
                    "(its HOST and PORT), or set wsrep_node_incoming_address on every node and "
                    "migrate again.",
                    alias,
                    peer.name,
                    peer.reason,
                    alias,
                )
        finally:
            for peer in others:
                peer.close()

    def repair(self, editor: BaseDatabaseSchemaEditor) -> None:
        """The nodes' own events (:meth:`install_ticks`): a replicated one would run on one
        node only."""
        self.install_ticks(editor)

    def install_ticks(self, editor: BaseDatabaseSchemaEditor) -> None:
        """The column default's event on this node and on every other node ``migrate`` can
        reach, each the node's own, made with replication off: MariaDB runs a replicated
        event on one node only, and each node may move only its own clock. A node it cannot
        reach has none until ``migrate`` runs through it (W059 says so there)."""
        if editor.collect_sql:
            return
        connection = editor.connection
        others = peers(connection)
        reached = [
            (peer.name, peer.connection)
            for peer in others
            if peer.connection is not None and peer.name != peer.address
        ]
        try:
            for node, target in [(self.node, connection), *reached]:
                with target.cursor() as cursor:
                    cursor.execute(LOCAL)
                    try:
                        self.install_tick(cursor.execute, node)
                    finally:
                        cursor.execute("SET SESSION wsrep_on = ON")
        finally:
            for peer in others:
                peer.close()

    def nodes_report(self) -> list[dict[str, Any]]:
        """Every node of the Galera cluster database ``alias`` is on, as ``show_worker`` lists
        them: its ``node`` name, its ``slot`` (``"W/D"`` as the coordination database records it
        for that node, ``None`` without one) and ``function``: ``"own"`` (keys of its own),
        ``"other"`` (on the trigger path the refusal of a first ``migrate`` that did not reach it,
        or another node's function, copied by a state transfer; on the column-default path a node
        the keys' expression does not name) or ``None`` when it cannot be read from here
        (``reason`` says why)."""
        connection, alias = self.connection, self.alias
        slots = labelled_slots(database_label(alias, ""))
        cluster_wide = self.installed_comment()
        found: list[tuple[str, BaseDatabaseWrapper | None, str]]
        if galera_nodes(cluster_wide) is not None:
            # One function for the whole cluster, replicated: read here for every node.
            found = [(name, None, "") for name in self.member_names()]
        else:
            cluster_wide = None
            found = [(self.node, connection, "")] + [
                (peer.name, peer.connection, peer.reason) for peer in peers(connection)
            ]
        report = []
        try:
            for name, node, reason in found:
                slot = slots.get(database_label(alias, name))
                entry: dict[str, Any] = {
                    "node": name,
                    "slot": None if slot is None else f"{slot[0]}/{slot[1]}",
                    "function": None,
                    "reason": reason,
                }
                if cluster_wide is not None or node is not None:
                    comment_there = (
                        cluster_wide if node is None else MariaDB(node).installed_comment()
                    )
                    entry["function"] = "own" if _served(comment_there, name) else "other"
                report.append(entry)
        finally:
            for _name, node, _reason in found[1:]:
                if node is not None:
                    node.close()
        return report
