"""``manage.py show_worker [--json] [--all]``: this process's layout, capacity and lease, and
each server database's function (where it lives, its slot, how far its clock is behind)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ... import get_generator
from ...conf import get_settings
from ...database_keys import function_report
from ...exceptions import SnowflakeError
from ...layout import BIT_FIELDS, bit_diagram, ms_to_datetime
from ...slots import database_alias, function_in_words, galera_node_in_words, reserved_for
from ...vendors import database

# The report's lines, for people; ``--json`` keeps the keys.
LABELS = {
    "layout": _("layout"),
    "ids_per_second_per_worker": _("ids per second per worker"),
    "workers": _("workers"),
    "workers_in_use": _("workers in use"),
    "lifespan_end": _("lifespan end"),
    "years_left": _("years left"),
    "allocator": _("allocator"),
    "database": _("database"),
    "lease_seconds": _("lease seconds"),
    "lease_expires_at": _("lease expires at"),
    "heartbeat_at": _("heartbeat at"),
    "reserved_until": _("reserved until"),
    "claim_ms": _("claim ms"),
    "clock_offset_ms": _("clock offset ms"),
    "incarnation": _("database incarnation"),
    "incarnation_since": _("incarnation first seen"),
    "worker_id": _("worker id"),
    "datacenter_id": _("datacenter id"),
    "clock_sequence": _("clock sequence"),
    "clock_rollback": _("clock rollback"),
    "max_rollback_ms": _("max rollback ms"),
    "high_water": _("high water"),
    # The parts of the layout.
    "fingerprint": _("fingerprint"),
    "time_bits": _("time bits"),
    "datacenter_bits": _("datacenter bits"),
    "clock_sequence_bits": _("clock sequence bits"),
    "worker_bits": _("worker bits"),
    "sequence_bits": _("sequence bits"),
    "time_unit_ms": _("time unit ms"),
    "epoch": _("epoch"),
    "label": _("label"),
    "database_functions": _("function of database"),
}


class Command(BaseCommand):
    help = (
        "Claim a worker slot if none is held, then show the layout (bit diagram, capacity, "
        "lifespan), the allocator, the worker and datacenter IDs, the lease and the clock policy."
    )
    requires_system_checks: list[str] = []  # report bad settings as a one-line error instead

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")
        parser.add_argument(
            "--all", action="store_true", help="Also list every slot of the worker table."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            generator = get_generator()
            lease = generator.ensure_lease()
        except SnowflakeError as exc:
            raise CommandError(self.unmigrated_message(exc) or str(exc)) from None
        except Exception as exc:  # ImproperlyConfigured, or a database that is not migrated
            message = self.unmigrated_message(exc) or f"{exc.__class__.__name__}: {exc}"
            raise CommandError(message) from None
        layout = generator.layout
        now = datetime.now(UTC)
        high = generator.last_timestamp
        lease_facts = generator.lease_source.describe()  # type: ignore[union-attr]
        if lease_facts.get("clock_offset_ms") is not None:
            # A tenth of a millisecond is all a clock offset measured over a network means.
            # (+ 0.0 turns a -0.0 into 0.0.)
            lease_facts["clock_offset_ms"] = round(lease_facts["clock_offset_ms"], 1) + 0.0
        report: dict[str, Any] = {
            "layout": {
                "fingerprint": layout.fingerprint,
                **{name: getattr(layout, name) for name in BIT_FIELDS},
                "time_unit_ms": layout.time_unit_ms,
                "epoch": layout.epoch_datetime.isoformat(),
            },
            "ids_per_second_per_worker": layout.ids_per_second,
            "workers": layout.workers,
            **self.workers_in_use(lease_facts.get("database"), lease.datacenter_id),
            "lifespan_end": layout.lifespan_end.isoformat(),
            "years_left": round((layout.lifespan_end - now).days / 365.25, 1),
            **lease_facts,
            "worker_id": lease.worker_id,
            "datacenter_id": lease.datacenter_id,
            "clock_sequence": generator.clock_sequence,
            "clock_rollback": generator.rollback,
            "max_rollback_ms": generator.max_rollback_ms,
            "high_water": None
            if high < 0
            else ms_to_datetime(layout.unit_start_ms(high)).isoformat(),
            "label": get_settings()["PROCESS_LABEL"],
            # Each server database's own function: where it lives, its slot, its clock.
            "database_functions": [
                found for alias in connections if (found := function_report(alias)) is not None
            ],
        }
        for found in report["database_functions"]:
            if str(found["where"]).startswith("node "):
                try:
                    found["galera_nodes"] = database(connections[found["database"]]).nodes_report()
                except (DatabaseError, SnowflakeError) as exc:
                    found["galera_nodes_error"] = str(exc).strip()
        if options["all"]:
            try:
                report["slots"] = self.slots()
            except DatabaseError as exc:
                message = self.unmigrated_message(exc) or gettext(
                    "The worker table cannot be read: %(error)s"
                ) % {"error": exc}
                raise CommandError(message) from None
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, default=str))
            return
        self.stdout.write(bit_diagram(layout))
        for key, value in report.items():
            if key == "slots":
                continue
            if key == "database_functions":
                for found in value:
                    words = function_in_words(found)
                    self.stdout.write(f"{LABELS[key]} {found['database']!r}: {words}")
                    for entry in found.get("galera_nodes", []):
                        self.stdout.write("  " + galera_node_in_words(entry, found["database"]))
                continue
            if key == "incarnation_since" and not report.get("incarnation"):
                continue  # no incarnation, nothing was first seen
            label = LABELS.get(key, key.replace("_", " "))
            if isinstance(value, dict) and key != "workers_in_use":
                # One line per part: the layout on one line was wider than any terminal.
                self.stdout.write(f"{label}:")
                for name, part in value.items():
                    self.stdout.write(f"  {LABELS.get(name, name.replace('_', ' '))}: {part}")
                continue
            self.stdout.write(f"{label}: {self.in_words(key, value, report)}")
        for slot in report.get("slots", []):
            self.stdout.write(self.slot_line(slot))

    def in_words(self, key: str, value: Any, report: dict[str, Any]) -> Any:
        """How a report line reads in the text form, where ``--json`` keeps the value."""
        if key == "high_water" and value is None:
            return gettext("none yet: no ID issued under this slot by this process")
        if key == "incarnation" and not value:
            return gettext("none: this database does not tell its servers apart (SQLite)")
        if key == "workers_in_use":
            databases = value["databases"]
            text = gettext("%(processes)d by processes, %(free)d free") % value
            if databases:
                text += ", " + gettext(
                    "%(count)d reserved for the database function of %(aliases)s"
                ) % {"count": len(databases), "aliases": ", ".join(map(repr, databases))}
            return text
        return value

    def slot_line(self, slot: dict[str, Any]) -> str:
        """One slot of ``--all``: a database function's slot says so, instead of reading as a
        process whose heartbeat stopped (pid 0, a lease to the year 9999)."""
        head = "slot {worker_id}/{datacenter_id}".format(**slot)
        if slot["database"] is not None:
            return f"{head} {reserved_for(slot['database'])}"
        return (
            "{head} {state} host={host_name} pid={process_id} label={label!r} "
            "expires={lease_expires_at}".format(head=head, **slot)
        )

    def workers_in_use(self, alias: str | None, datacenter_id: int) -> dict[str, Any]:
        """For the database allocator: the slots of this datacenter that processes hold, the
        ones free to claim, and the databases whose function holds one."""
        if alias is None:
            return {}
        from ...models import WorkerNode

        layout = get_generator().layout
        live = [
            node
            for node in WorkerNode.objects.using(alias).filter(datacenter_id=datacenter_id)
            if node.lease_state(timezone.now()) == "active"
        ]
        databases = sorted(name for name in map(database_alias, live) if name is not None)
        processes = len(live) - len(databases)
        return {
            "workers_in_use": {
                "processes": processes,
                "databases": databases,
                "free": layout.workers - len(live),
            }
        }

    def unmigrated_message(self, exc: BaseException) -> str | None:
        """One line telling the user to run ``migrate``, if the worker table is missing.

        The allocator reports any database failure with the driver's text (a SQL fragment
        and a caret on PostgreSQL); the likeliest one, a table not created yet, deserves a
        plain answer. ``None`` when the error has another cause or the database cannot say.
        """
        from ...models import WorkerNode

        causes: list[BaseException] = []
        cause: BaseException | None = exc
        while cause is not None and cause not in causes:
            causes.append(cause)
            cause = cause.__cause__ or cause.__context__
        if not any(isinstance(cause, DatabaseError) for cause in causes):
            return None
        alias = get_settings()["DATABASE"]
        table = WorkerNode._meta.db_table
        try:
            with connections[alias].cursor() as cursor:
                tables = connections[alias].introspection.table_names(cursor)
        except Exception:  # the database itself is unreachable: the original error says so
            return None
        if table in tables:
            return None
        return gettext(
            "The worker table %(table)s does not exist in the database %(alias)r yet: "
            "run `python manage.py migrate` first."
        ) % {"table": table, "alias": alias}

    def slots(self) -> list[dict[str, Any]]:
        from ...models import WorkerNode

        now = timezone.now()
        rows = WorkerNode.objects.using(get_settings()["DATABASE"])
        return [
            {
                "worker_id": node.worker_id,
                "datacenter_id": node.datacenter_id,
                "state": node.lease_state(now),
                "database": database_alias(node),
                "host_name": node.host_name,
                "process_id": node.process_id,
                "label": node.label,
                "lease_expires_at": node.lease_expires_at.isoformat(),
                "last_timestamp": node.last_timestamp,
            }
            for node in rows
        ]
