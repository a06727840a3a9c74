"""``manage.py decode_snowflake ID [ID ...] [--json]``: the fields of IDs under the layout."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import decode
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
            return
        self.stdout.write("\n\n".join(self.describe(parts) for parts in decoded))

    def describe(self, parts: SnowflakeParts) -> str:
        rows = parts.as_dict()
        width = max(map(len, rows))
        return "\n".join(f"{key.ljust(width)}  {value}" for key, value in rows.items())
