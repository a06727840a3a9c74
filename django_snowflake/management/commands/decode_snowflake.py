"""``manage.py decode_snowflake ID [ID ...] [--json]``: the fields of IDs under the layout."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import gettext

from ... import decode
from ...conf import get_layout
from ...exceptions import InvalidSnowflake
from ...layout import SnowflakeParts


class Command(BaseCommand):
    # Help texts stay plain strings: argparse cannot format lazy translations, and Django's
    # own commands do not translate theirs either.
    help = (
        "Show the creation time, datacenter, clock sequence, worker and sequence of Snowflake "
        "IDs under the configured layout."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ids", nargs="+", metavar="ID", help="IDs to decode, as digits.")
        parser.add_argument(
            "--json",
            action="store_true",
            help=(
                "Print JSON: one object for one ID, a list of objects for several "
                "(timestamp in ISO-8601, UTC)."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            decoded = [decode(value) for value in options["ids"]]
        except InvalidSnowflake as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            objects = [parts.as_dict() for parts in decoded]
            # One ID, one object: ``decode_snowflake ID --json | jq .timestamp`` just works.
            self.stdout.write(json.dumps(objects[0] if len(objects) == 1 else objects, indent=2))
            # The documented object stays as it is; the doubt goes where people read it.
            for parts in decoded:
                note = self.doubt(parts)
                if note:
                    self.stderr.write(f"{parts.id}: {note}")
            return
        self.stdout.write("\n\n".join(self.describe(parts) for parts in decoded))

    def describe(self, parts: SnowflakeParts) -> str:
        rows: dict[str, Any] = parts.as_dict()
        note = self.doubt(parts)
        if note:
            rows["note"] = note
        width = max(map(len, rows))
        return "\n".join(f"{key.ljust(width)}  {value}" for key, value in rows.items())

    def doubt(self, parts: SnowflakeParts) -> str:
        """Why no generator of this layout issued the ID, if it can tell; else ``""``.

        Any 63-bit number decodes, but a generator issues IDs only for the time it runs at:
        time 0 is the epoch's first time unit, long past for every layout a check accepts,
        and a time in the future is not reached yet.
        """
        layout = get_layout()
        if parts.timestamp < layout.epoch_datetime + timedelta(milliseconds=layout.time_unit_ms):
            return gettext(
                "Not an ID a generator of this layout issues: its time is the epoch itself "
                "(%(epoch)s), which a generator uses only while its clock reads the epoch's "
                "first time unit, and every check-approved epoch is in the past. A number this "
                "small is likely an AutoField key from before the switch to Snowflake keys "
                '(docs: "Migrating"), or an ID of another layout.'
            ) % {"epoch": layout.epoch_datetime.isoformat()}
        if parts.timestamp > datetime.now(UTC):
            return gettext(
                "Not an ID any generator of this layout has issued yet: its time is in the "
                "future. It may be an ID of another layout or epoch."
            )
        return ""
