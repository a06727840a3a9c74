"""How a ``WorkerNode`` row reads to people: a process's slot or a database function's.

The admin and ``show_worker`` both say it, from the marks the database's own claim
(:mod:`django_snowflake.database_keys`) writes into the row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext

from .database_slots import DATABASE_HOST, DATABASE_LABEL

if TYPE_CHECKING:
    from .models import WorkerNode


def database_alias(node: WorkerNode) -> str | None:
    """The alias of the database whose SQL function holds the slot (label
    ``"database:<alias>"``), ``""`` for a database slot whose label names no alias (rows
    written before labels did), ``None`` for a process's slot."""
    if node.host_name != DATABASE_HOST:
        return None
    prefix, _, alias = node.label.partition(":")
    return alias if prefix == DATABASE_LABEL else ""


def reserved_for(alias: str) -> str:
    """The slot of a database's SQL function, in words: it never renews, so a heartbeat
    that stays at the claim's time is not a stuck process."""
    if alias:
        return gettext("reserved for the database function of database %(alias)s, no heartbeat") % {
            "alias": repr(alias)
        }
    return gettext("reserved for a database function, no heartbeat")


def function_in_words(report: dict[str, Any]) -> str:
    """A database function's :func:`~django_snowflake.database_keys.function_report`, in words."""
    if "error" in report:
        return gettext("cannot be read: %(error)s") % report
    if not report["installed"]:
        return gettext("not installed (%(where)s): run manage.py migrate") % report
    words = gettext("in %(where)s, slot %(slot)s") % {
        "where": report["where"],
        "slot": report["slot"] or gettext("none (it refuses)"),
    }
    if report["behind_ms"] is None:
        return words + ", " + gettext("clock n/a")
    return (
        words + ", " + gettext("%(ms)d ms behind the server's clock") % {"ms": report["behind_ms"]}
    )


def galera_node_in_words(entry: dict[str, Any], alias: str) -> str:
    """A node of :func:`~django_snowflake.vendors.galera.nodes_report`, in words."""
    values = {"node": entry["node"], "slot": entry["slot"] or gettext("none"), "alias": alias}
    if entry["function"] == "own":
        return gettext("Galera node %(node)s: slot %(slot)s, keys of its own") % values
    if entry["function"] == "other":
        return (
            gettext(
                "Galera node %(node)s: slot %(slot)s, no function of its own: run manage.py "
                "migrate --database=%(alias)s connected to it"
            )
            % values
        )
    return gettext(
        "Galera node %(node)s: slot %(slot)s, its function not readable from here (%(reason)s)"
    ) % {**values, "reason": entry["reason"]}
