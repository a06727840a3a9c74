"""A probe run by hand: ``python -m benchmarks.galera_defaults`` (needs Debian's galera-4 and
rsync, as the Galera tests do).

What a keyed column's ``DEFAULT`` costs an INSERT on Galera, by what it names. On a private
3-node cluster (``harness.galera``), one-row INSERTs through the three nodes at once
(``CONNECTIONS`` per node, autocommit) into tables that differ only in their key's default:
none (the key given), the column-default path's expression (a ``CASE`` over one ``NOCACHE``
sequence per node, and the spent one), and one ``NOCACHE`` sequence shared by the nodes with
each node's slot from a ``CASE`` over constants; each keyed table with its key given (as
Django's ``create()`` gives it) and left out (raw SQL), against an ``AUTO_INCREMENT`` table
leaving its key out, in rotated turns. Then the given keys again with replication off for the
sessions (``wsrep_on = OFF``), which tells Galera's share from the server's. Writes
``benchmarks/probes/galera_defaults.json``; docs/high_availability.rst quotes it.
"""

from __future__ import annotations

from django_snowflake.layout import BitLayout
from django_snowflake.vendors.mysql import keys
from django_snowflake.vendors.mysql.trigger import KeyClock
from harness import galera

from .common import insert_rate, rotated
from .galera import node_connections, probe_start

ROUNDS = 5
TURN_SECONDS = 3.0
DATABASE = "snowflake_galera_defaults"
AUTO = "auto_increment"
SHARED = "django_snowflake_id_shared_key"


def _tables(nodes: list[str]) -> dict[str, str]:
    """The key column of each table, by the table's name."""
    layout = BitLayout.preset("twitter")
    slots = {name: (number, 0) for number, name in enumerate(nodes, start=1)}
    unit = 1 << layout.sequence_bits
    slot_bits = " ".join(
        f"WHEN '{name}' THEN {layout.compose(0, worker_id=worker, datacenter_id=datacenter)}"
        for name, (worker, datacenter) in slots.items()
    )
    shared = (
        f"(NEXT VALUE FOR {SHARED}) DIV {unit} * {1 << layout.time_shift} + "
        f"CASE @@wsrep_node_name {slot_bits} END + (PREVIOUS VALUE FOR {SHARED}) MOD {unit}"
    )
    return {
        AUTO: "id BIGINT AUTO_INCREMENT PRIMARY KEY",
        "no_default": "id BIGINT PRIMARY KEY",
        "per_node": f"id BIGINT PRIMARY KEY DEFAULT ({keys.galera_key_expression(layout, slots)})",
        "shared": f"id BIGINT PRIMARY KEY DEFAULT ({shared})",
    }


def main() -> None:
    cluster = galera.Galera()
    try:
        first, *_ = cluster.nodes
        first.sql(f"CREATE DATABASE {DATABASE}")
        names = [node.name for node in cluster.nodes]
        # Their values do not matter here: what an INSERT pays for naming them does.
        for sequence in [
            *(KeyClock(name).sequence for name in names),
            SHARED,
            keys.NO_SLOT_SEQUENCE,
        ]:
            first.sql(f"CREATE SEQUENCE {sequence} START WITH 0 MINVALUE 0 NOCACHE", DATABASE)
        tables = _tables(names)
        for table, key in tables.items():
            first.sql(f"CREATE TABLE {table} ({key}, label VARCHAR(100))", DATABASE)
        ports, server, record = probe_start(
            cluster, "galera_defaults", __doc__, ROUNDS, TURN_SECONDS
        )
        turns = [(AUTO, False, True)]
        turns += [
            (table, given, True) for table in tables if table != AUTO for given in (True, False)
        ]
        turns = [turn for turn in turns if not (turn[0] == "no_default" and not turn[1])]
        turns += [(table, True, False) for table in tables if table != AUTO]
        turns += [(AUTO, False, False)]
        rates: dict[str, list[float]] = {}
        for round_ in range(ROUNDS):
            for table, given, replicated in rotated(turns, round_):
                session = "" if replicated else "SET SESSION wsrep_on = OFF"
                with node_connections(ports, DATABASE, session=session) as opened:
                    rate = insert_rate(opened, table, TURN_SECONDS, column="label", given=given)
                record.turn_done()
                name = f"{table}/{'given' if given else 'left_out'}"
                name += "" if replicated else "/wsrep_off"
                rates.setdefault(name, []).append(rate)
                print(f"round {round_ + 1} {name:32} {rate:8,.0f} rows/s", flush=True)
    finally:
        cluster.close()
    ratios = {}
    for name, values in rates.items():
        baseline = rates[f"{AUTO}/left_out" + ("/wsrep_off" if name.endswith("wsrep_off") else "")]
        ratios[name] = sorted(
            round(value / base, 3) for value, base in zip(values, baseline, strict=True)
        )
    record.write(server, ratios=ratios)


if __name__ == "__main__":
    main()
