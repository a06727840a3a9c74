"""The worker slot of each database's own key generator, leased in the coordination database.

A database's function (:mod:`django_snowflake.database_keys`) issues under a slot of its own:
a ``WorkerNode`` row on ``SNOWFLAKE["DATABASE"]`` labelled ``database:<alias>`` (a Galera
node's ``database:<alias>@<wsrep_node_name>``), host ``(database)``, with a lease that never
expires, so no process claims it. Database slots are taken from the highest worker ID down;
processes claim from the lowest up.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings as django_settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from .exceptions import LayoutMismatch, SnowflakeError
from .layout import BitLayout

DATABASE_HOST = "(database)"
DATABASE_LABEL = "database"
LEASE_END = datetime(9999, 12, 31, tzinfo=UTC)


def worker_node() -> Any:
    # Through the app registry: models is above this module (fields import it).
    from django.apps import apps

    return apps.get_model("django_snowflake", "WorkerNode")


def database_label(alias: str, node: str | None = None) -> str:
    """The ``WorkerNode.label`` of the slot leased for the function of database ``alias``, or
    of its Galera node ``node`` (its ``wsrep_node_name``)."""
    label = f"{DATABASE_LABEL}:{alias}"
    return label if node is None else f"{label}@{node}"


def lease_database_slot(
    alias: str, layout: BitLayout, node: str | None = None, keep: tuple[int, int] | None = None
) -> tuple[int, int] | None:
    """The worker slot of database ``alias``'s function (of its Galera node ``node``'s),
    leased for good in ``WorkerNode`` on the coordination database; ``None`` while that
    database has no ``WorkerNode`` table.

    A slot this database already holds is kept. Otherwise the highest worker ID (in
    ``DATACENTER_ID``) that has never had a row is taken with the claim's compare-and-set: an
    INSERT whose unique constraint picks the winner of a race. Processes claim from the lowest
    ID up and never take a lease that does not expire, so the two never meet. Raises
    ``LayoutMismatch`` when the table holds slots of another layout, ``SnowflakeError`` when no
    worker ID is left.

    ``keep``, the slot the installed function issues under, is tried first: a table that
    records it for nobody (flushed by a test runner, or a tenant schema's own copy of the table,
    made when the app is in django-tenants' ``TENANT_APPS`` too, which a ``migrate`` of that
    schema reads) must not move the database's one function to another slot.
    """
    from .conf import get_settings

    settings = get_settings()
    coordination = settings["DATABASE"]
    WorkerNode = worker_node()
    datacenter = int(settings["DATACENTER_ID"] or 0)
    nodes = WorkerNode._default_manager.using(coordination)
    try:
        with transaction.atomic(using=coordination):
            other = nodes.exclude(layout=layout.fingerprint).values_list("layout", flat=True)
            mismatch = other.first()
    except DatabaseError:
        return None  # no WorkerNode table (yet) on the coordination database
    if mismatch is not None:
        raise LayoutMismatch(layout.fingerprint, mismatch)
    mine = nodes.filter(host_name=DATABASE_HOST, released_at=None, datacenter_id=datacenter)
    label = database_label(alias, node)
    # The slot of the one database a version before 0.2 leased, labelled "database".
    legacy = (
        mine.filter(label=DATABASE_LABEL) if alias == coordination and node is None else mine.none()
    )
    held = mine.filter(label=label).first()
    if held is None and legacy.update(label=label):
        held = mine.filter(label=label).first()
    if held is not None:
        return held.worker_id, held.datacenter_id
    # Naive datetimes when USE_TZ is False: MySQL's backend refuses aware ones then.
    now = timezone.now()
    never = LEASE_END if django_settings.USE_TZ else LEASE_END.replace(tzinfo=None)
    order: Iterable[int] = range(layout.max_worker_id, -1, -1)
    if keep is not None and keep[1] == datacenter and keep[0] <= layout.max_worker_id:
        order = itertools.chain([keep[0]], order)
    for worker in order:
        if nodes.filter(worker_id=worker, datacenter_id=datacenter).exists():
            continue
        try:
            with transaction.atomic(using=coordination):
                nodes.create(
                    worker_id=worker,
                    datacenter_id=datacenter,
                    host_name=DATABASE_HOST,
                    label=label,
                    process_id=0,
                    launched_at=now,
                    heartbeat_at=now,
                    lease_expires_at=never,
                    released_at=None,
                    last_timestamp=0,
                    layout=layout.fingerprint,
                    token=f"database-{os.urandom(8).hex()}",
                )
        except IntegrityError:
            held = mine.filter(label=label).first()
            if held is not None:  # another migrate of this database won the race
                return held.worker_id, held.datacenter_id
            continue  # a process or another database took this one: the next one down
        return worker, datacenter
    raise SnowflakeError(
        f"No worker ID is left for the Snowflake function of {label!r}: all "
        f"{layout.max_worker_id + 1} slots of datacenter {datacenter} have rows in WorkerNode. "
        "Raise WORKER_BITS or use another DATACENTER_ID."
    )


def slot_holder(slot: tuple[int, int]) -> str | None:
    """The label the coordination database records for ``slot``, ``None`` without a row."""
    from .conf import get_settings

    label: str | None = (
        worker_node()
        ._default_manager.using(get_settings()["DATABASE"])
        .filter(worker_id=slot[0], datacenter_id=slot[1])
        .values_list("label", flat=True)
        .first()
    )
    return label


def labelled_slots(prefix: str) -> dict[str, tuple[int, int]]:
    """The slots the coordination database records under labels starting with ``prefix``."""
    from .conf import get_settings

    rows = (
        worker_node()
        ._default_manager.using(get_settings()["DATABASE"])
        .filter(label__startswith=prefix, released_at=None)
        .values_list("label", "worker_id", "datacenter_id")
    )
    return {label: (worker, datacenter) for label, worker, datacenter in rows}
