"""The checks that read the databases they are given (``Tags.database``): the worker table
(E039, W030) and each database's own Snowflake function (W050-W054, W058; W059 with
``check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage
from django.utils.translation import gettext_lazy as _

from .. import conf, runtime
from ..allocators.database import DatabaseAllocator
from ..allocators.failover import asynchronous_standbys
from .settings import _error, _join, _warning, allocator_class


def _database_allocator_in(databases: Any) -> str | None:
    """The alias of the worker table when these checks may read it, else ``None``: only the
    database allocator has one, and only valid settings say where it is."""
    values = conf.get_settings()
    alias = values["DATABASE"]
    if databases is None or alias not in databases or runtime.settings_errors():
        return None
    allocator = allocator_class(values)
    return alias if allocator is not None and issubclass(allocator, DatabaseAllocator) else None


def check_worker_table(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """E039: the worker table holds slots claimed under another layout."""
    values = conf.get_settings()
    if databases is None or values["DATABASE"] not in databases or runtime.settings_errors():
        return []
    from django.db import DatabaseError

    from ..models import WorkerNode

    alias = values["DATABASE"]
    ours = conf.get_layout().fingerprint
    try:
        theirs = (
            WorkerNode.objects.using(alias)
            .exclude(layout=ours)
            .values_list("layout", flat=True)
            .first()
        )
    except DatabaseError:  # not migrated yet: nothing to compare
        return []
    if theirs is None:
        return []
    return [
        _error(
            "E039",
            _(
                "The worker table of database %(alias)s holds slots claimed under the layout "
                "%(theirs)s, but the settings describe %(ours)s."
            ),
            _(
                "Restore the SNOWFLAKE layout those IDs were made with. Only if no row of any "
                "table holds an ID of the old layout, delete the old WorkerNode rows."
            ),
            alias=repr(alias),
            theirs=theirs,
            ours=ours,
        )
    ]


def check_standbys(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W030: the worker table's database streams to asynchronous standbys."""
    alias = _database_allocator_in(databases)
    if alias is None:
        return []
    count = asynchronous_standbys(alias)
    if not count:  # none, or the database does not let us see them
        return []
    return [
        _warning(
            "W030",
            _(
                "The database %(alias)s, which holds the worker table, replicates to "
                "asynchronous standbys (%(count)s): a failover to one may lose the last lease "
                "writes."
            ),
            _(
                "No ID repeats: after a failover, claims issue IDs at once, above every time "
                'a lost lease may have used (SNOWFLAKE["FAILOVER"], docs: "High-availability '
                'databases"). To lose no write, replicate synchronously '
                "(synchronous_standby_names, semi-synchronous replication) at the cost of a "
                "round trip per commit; the skip stays, as every promotion is a new "
                "incarnation. Else silence django_snowflake.W030 in SILENCED_SYSTEM_CHECKS."
            ),
            alias=repr(alias),
            count=count,
        )
    ]


def _check_copies(alias: str) -> list[CheckMessage]:
    """W052, W053: a PostgreSQL database with functions outside the function schema, or one
    whose ``search_path`` is not pinned."""
    from django.db import connections

    from ..vendors import database

    keys = database(connections[alias])
    found, schema = keys.function_copies(), keys.function_schema()
    if not found:
        return []
    repair = _(
        "Run: python manage.py migrate --database=%(alias)s. It keeps the function in "
        "%(schema)s, gives every table that defaults to another copy that one, skips its clock "
        "past theirs and drops them (docs: Schemas and django-tenants)."
    )
    messages = []
    if any(name != schema for name, _ in found):
        messages.append(
            _warning(
                "W052",
                _(
                    "Database %(alias)s has %(count)d django_snowflake_id() functions, in "
                    "schemas %(schemas)s, where SNOWFLAKE['FUNCTION_SCHEMA'] is %(schema)s: "
                    "each has sequences of its own under the database's one slot, so two "
                    "schemas may hold the same key."
                ),
                repair,
                alias=alias,
                count=len(found),
                schemas=_join(name for name, _ in found),
                schema=schema,
            )
        )
    unpinned = [name for name, pinned in found if not pinned]
    if unpinned:
        messages.append(
            _warning(
                "W053",
                _(
                    "The django_snowflake_id() of database %(alias)s in schema %(schemas)s does "
                    "not pin its search_path: sequences of the same names on a caller's "
                    "search_path would be drawn instead of its own."
                ),
                repair,
                alias=alias,
                schemas=_join(unpinned),
                schema=schema,
            )
        )
    return messages


def _keys_switch(alias: str) -> CheckMessage | None:
    """W054: a MariaDB database on another path than ``SNOWFLAKE["MARIADB_KEYS"]`` names."""
    from django.db import connections

    from ..vendors import database
    from ..vendors.mysql.keys import KEYS

    paths = database(connections[alias]).keys_paths()
    if paths is None or conf.get_settings()["MARIADB_KEYS"] not in KEYS:
        return None
    installed, wanted = paths
    if installed in (None, wanted):
        return None
    return _warning(
        "W054",
        _(
            "The keys of database %(alias)s come from the %(installed)s path, but "
            'SNOWFLAKE["MARIADB_KEYS"] names the %(wanted)s path.'
        ),
        _(
            "Run: python manage.py migrate --database=%(alias)s, which switches the function "
            "and every keyed column's default and trigger."
        ),
        alias=alias,
        installed=installed,
        wanted=wanted,
    )


def _stranger_texts() -> dict[bool, tuple[Any, Any]]:
    """W058's message and hint: on the trigger path (``False``), on the column default."""
    return {
        True: (
            _(
                "Galera node %(node)s of database %(alias)s has no keys of its own: the keys' "
                "expression does not name it, and every INSERT through it that leaves a "
                "Snowflake key out fails."
            ),
            _(
                "It was down, or not yet in the cluster, at the last migrate. Run: python "
                "manage.py migrate --database=%(alias)s through any node while it is in the "
                "cluster."
            ),
        ),
        False: (
            _(
                "Galera node %(node)s of database %(alias)s has no Snowflake function of its "
                "own: every INSERT through it that leaves a Snowflake key out fails."
            ),
            _(
                "A migrate through another node did not reach it (it advertises no address, "
                "wsrep_node_incoming_address = AUTO, or was down or unreachable), or a state "
                "transfer copied another node's function. Run: python manage.py migrate "
                "--database=%(alias)s connected to this node."
            ),
        ),
    }


def check_database_functions(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W050, W051, W058: a database whose Snowflake function has no slot of its own, or one
    it does not hold in the coordination database (a copy of another database's function), or
    a Galera node of it whose function is not its own.
    W052, W053: a PostgreSQL database with more than one function, or an unpinned one.
    W054: a MariaDB database on another path than ``SNOWFLAKE["MARIADB_KEYS"]``.
    E055: a MariaDB database on the column-default path whose role lacks a privilege the
    heartbeat needs to move its key clock (an error, since nothing else shows it; the owner
    that runs ``migrate`` has every privilege, so it stops no migration).

    Warnings, not errors: ``migrate`` runs the database checks and stops at an error, and
    ``migrate`` of that database is what gives its function a slot of its own.

    A Galera node whose function is not its own (another node's, copied by a state transfer,
    or the refusal of a ``migrate`` that did not reach it) is W058 and nothing else: that
    function refuses every call there, saying to migrate through the node."""
    if databases is None or runtime.settings_errors():
        return []
    from django.db import DatabaseError, connections

    from ..database_slots import slot_holder
    from ..vendors import database

    coordination = conf.get_settings()["DATABASE"]
    messages: list[CheckMessage] = []
    for alias in databases:
        try:
            messages += _check_copies(alias)
            keys = database(connections[alias])
            exists, slot = keys.function_slot()
            stranger = keys.node_name() if exists and keys.stranger() else None
            unnamed = stranger is not None and (keys.keys_paths() or ("",))[0] == "default"
            grants = keys.missing_grants()
        except DatabaseError:
            continue  # not reachable or not migrated: nothing to judge
        if grants:
            messages.append(
                _error(
                    "E055",
                    _(
                        "The role of database %(alias)s cannot move its key clock: keys of "
                        "raw INSERTs there fall behind the clock."
                    ),
                    _("Run as the database's owner: %(grants)s"),
                    alias=alias,
                    grants=" ".join(grants),
                )
            )
        if not exists:
            continue
        if stranger:
            # W058 says what is true of the node's path.
            text = _stranger_texts()[unnamed]
            messages.append(_warning("W058", *text, alias=alias, node=stranger))
            continue
        try:
            switch = _keys_switch(alias)
        except DatabaseError:
            switch = None
        if switch is not None:
            messages.append(switch)
        if slot is None:
            messages.append(
                _warning(
                    "W050",
                    _(
                        "The Snowflake function of database %(alias)s has no worker slot of "
                        "its own: every INSERT that leaves a Snowflake key out fails."
                    ),
                    _(
                        "It was installed before database %(coordination)s had its WorkerNode "
                        "table. Run: python manage.py migrate --database=%(coordination)s, then "
                        "python manage.py migrate --database=%(alias)s."
                    ),
                    alias=alias,
                    coordination=coordination,
                )
            )
            continue
        try:
            holder, own = slot_holder(slot), keys.own_label()
        except DatabaseError:
            continue
        if holder in (None, own):
            continue  # its own, or no row (a test runner's flush): nothing issues under it
        messages.append(
            _warning(
                "W051",
                _(
                    "The Snowflake function of database %(alias)s issues under worker "
                    "slot %(slot)s, which database %(coordination)s records for %(holder)s: "
                    "two issuers of one ID space may make the same keys."
                ),
                _(
                    "The database is a copy of another, or the coordination database lost "
                    "the row. Run: python manage.py migrate --database=%(alias)s, which "
                    "leases a slot of its own for it and installs the function again."
                ),
                alias=alias,
                slot=f"{slot[0]}/{slot[1]}",
                coordination=coordination,
                holder=holder or "nobody",
            )
        )
    return messages


def _idle_reasons() -> dict[str, tuple[Any, Any]]:
    """What W059 says for each of :meth:`~.vendors.base.Database.idle_clock`'s answers."""
    return {
        "off": (
            _("the server's event scheduler is off, so its event %(event)s never runs"),
            _(
                "Run SET GLOBAL event_scheduler = ON, and set event_scheduler = ON in the "
                "server's configuration so that it stays on after a restart."
            ),
        ),
        "missing": (
            _("the database has no event %(event)s: the role that ran migrate may not create one"),
            _(
                "Run as the server's administrator: GRANT EVENT ON the database TO the role that "
                "runs migrate; then run: python manage.py migrate --database=%(alias)s."
            ),
        ),
        "disabled": (
            _(
                "its event %(event)s is disabled on this server, as replication leaves it on a "
                "replica, which this server was before a failover"
            ),
            _(
                "Run: python manage.py migrate --database=%(alias)s (or ALTER EVENT %(event)s "
                "ENABLE) on the new primary after each failover."
            ),
        ),
        "hidden": (
            _("this role may not see the database's events"),
            _("Run check --deploy --database=%(alias)s as the role that runs migrate."),
        ),
    }


def check_database_clocks(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W059 (``check --deploy --database``): a database whose raw keys stop following the
    clock while no process of the project runs (MariaDB's column default without a running
    event, docs: Grants)."""
    if databases is None or runtime.settings_errors():
        return []
    from django.db import DatabaseError, connections

    from ..vendors import database
    from ..vendors.mysql.keys import TICK_EVENT as event

    reasons = _idle_reasons()
    messages: list[CheckMessage] = []
    for alias in databases:
        try:
            reason = database(connections[alias]).idle_clock()
        except DatabaseError:
            continue  # not reachable or not migrated: nothing to judge
        if reason is None:
            continue
        why, hint = reasons[reason]
        messages.append(
            _warning(
                "W059",
                _(
                    "Keys of raw INSERTs into database %(alias)s stop following the clock "
                    "while no process of the project runs (they count up from the last "
                    "heartbeat's move): %(why)s."
                ),
                hint,
                alias=alias,
                why=str(why) % {"event": event},
                event=event,
            )
        )
    return messages
