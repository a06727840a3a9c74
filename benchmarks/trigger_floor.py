"""A probe run by hand: ``python -m benchmarks.trigger_floor`` (MariaDB only).

How fast MariaDB's ways of giving a key in the server can be at all, against
``AUTO_INCREMENT``: raw one-row INSERTs from 8 and 32 connections (threads, each its own
connection, autocommit), each way and its baseline in turns of a few seconds, into a table whose
key comes from

- ``default``: the column's ``DEFAULT (NEXT VALUE FOR s)``, a cached sequence, no trigger;
- ``trigger``: a ``BEFORE INSERT`` trigger setting ``NEXT VALUE FOR s`` itself;
- ``function_1``: the trigger calling a stored function that draws one ``NOCACHE`` sequence;
- ``function_15``: the same function naming 15 sequences (it draws one): MariaDB opens and
  locks, for every statement, each sequence a trigger's function may touch;
- ``snowflake``: the trigger and function the package installs (``vendors.mysql``, the
  ``twitter`` layout).

and, for the trigger ways, INSERTs that give the key (as Django's ``create()`` does under the
switch), which fire the trigger without calling its function: what the trigger alone costs.

A stored function cannot be a column's ``DEFAULT``, and only a function can follow the clock,
bound its lead and notice a failover (``vendors.mysql``): the record
(``benchmarks/probes/mariadb_trigger_floor.json``) says what each step costs. The page's
"Concurrent inserts" section renders it.
"""

from __future__ import annotations

import os
from contextlib import closing
from types import SimpleNamespace
from typing import Any, cast

from .common import ProbeRecord, insert_rate, rotated

DATABASE = "snowflake_trigger_floor"
WAYS = ("default", "trigger", "function_1", "function_15", "snowflake")
GIVEN_WAYS = ("trigger", "function_15", "snowflake")
CLIENTS = (8, 32)
ROUNDS = 3
TURN_SECONDS = 3.0


def _connect(conf: dict[str, Any], database: str | None = DATABASE) -> Any:
    import MySQLdb

    return MySQLdb.connect(
        host=conf["HOST"],
        port=int(conf["PORT"]),
        user=conf["USER"],
        password=conf["PASSWORD"],
        autocommit=True,
        **({"database": database} if database else {}),
    )


def _function_sql(name: str, sequences: int) -> str:
    others = " ".join(f"SET x = NEXT VALUE FOR {name}_{i};" for i in range(1, sequences))
    return (
        f"CREATE FUNCTION {name}() RETURNS BIGINT NOT DETERMINISTIC MODIFIES SQL DATA BEGIN "
        f"DECLARE x BIGINT; SET x = NEXT VALUE FOR {name}_0; "
        # Never taken: the other sequences are named, as the package's function names its.
        f"IF x < 0 THEN {others or 'SET x = 0;'} END IF; RETURN x + 1; END"
    )


def _setup(conf: dict[str, Any]) -> None:
    from django_snowflake.layout import BitLayout
    from django_snowflake.vendors.mysql.trigger import create_trigger_sql, mysql_function_sql

    with closing(_connect(conf, None)) as admin:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.cursor().execute(f"CREATE DATABASE {DATABASE}")
    keyed = "(id BIGINT NOT NULL DEFAULT 0 PRIMARY KEY, v INT) ENGINE=InnoDB"
    layout = BitLayout.preset("twitter")
    editor = cast(Any, SimpleNamespace(quote_name=lambda name: f"`{name}`"))
    statements = [
        "CREATE TABLE auto_increment (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB",
        "CREATE SEQUENCE s START WITH 1 MINVALUE 0",
        "CREATE TABLE `default` (id BIGINT NOT NULL DEFAULT (NEXT VALUE FOR s) PRIMARY KEY, "
        "v INT) ENGINE=InnoDB",
        f"CREATE TABLE `trigger` {keyed}",
        "CREATE TRIGGER trigger_key BEFORE INSERT ON `trigger` FOR EACH ROW "
        "IF NEW.id = 0 THEN SET NEW.id = NEXT VALUE FOR s; END IF",
    ]
    for sequences in (1, 15):
        name = f"function_{sequences}"
        statements += [
            *(
                f"CREATE SEQUENCE {name}_{i} START WITH 0 MINVALUE 0 NOCACHE"
                for i in range(sequences)
            ),
            _function_sql(name, sequences),
            f"CREATE TABLE {name} {keyed}",
            f"CREATE TRIGGER {name}_key BEFORE INSERT ON {name} FOR EACH ROW "
            f"IF NEW.id = 0 THEN SET NEW.id = {name}(); END IF",
        ]
    statements += [
        *mysql_function_sql(layout, (5, 0), lead_units=1000, hold_units=60_000),
        f"CREATE TABLE snowflake {keyed}",
        create_trigger_sql(editor.quote_name, "snowflake", "id"),
    ]
    with closing(_connect(conf)) as connection:
        for statement in statements:
            connection.cursor().execute(statement)


def _rate(conf: dict[str, Any], table: str, clients: int, *, given: bool = False) -> float:
    """Rows per second of one-row INSERTs into ``table`` from ``clients`` connections, with
    the key left out, or ``given``."""
    connections = [_connect(conf) for _ in range(clients)]
    try:
        return insert_rate(connections, table, TURN_SECONDS, column="v", given=given)
    finally:
        for connection in connections:
            connection.close()


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django
    from django.conf import settings

    django.setup()
    conf = settings.DATABASES["mariadb"]
    _setup(conf)
    ratios: dict[str, dict[str, list[float]]] = {way: {} for way in WAYS}
    given: dict[str, dict[str, list[float]]] = {way: {} for way in GIVEN_WAYS}
    record = ProbeRecord("mariadb_trigger_floor", __doc__, turn_seconds=TURN_SECONDS, rounds=ROUNDS)
    try:
        for round_ in range(ROUNDS):
            for clients in CLIENTS:
                for way in rotated(WAYS, round_):
                    baseline = _rate(conf, "auto_increment", clients)
                    ours = _rate(conf, way, clients)
                    ratios[way].setdefault(str(clients), []).append(round(ours / baseline, 3))
                    record.turn_done()
                    print(f"{clients} clients, {way}: {ours / baseline:.2f}x", flush=True)
                for way in rotated(GIVEN_WAYS, round_):
                    baseline = _rate(conf, "auto_increment", clients)
                    ours = _rate(conf, way, clients, given=True)
                    given[way].setdefault(str(clients), []).append(round(ours / baseline, 3))
                    record.turn_done()
                    print(
                        f"{clients} clients, {way}, key given: {ours / baseline:.2f}x", flush=True
                    )
    finally:
        with closing(_connect(conf, None)) as admin:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    with closing(_connect(conf, None)) as admin:
        cursor = admin.cursor()
        cursor.execute("SELECT VERSION()")
        (version,) = cursor.fetchone()
    record.write(version, ratios=ratios, given=given)


if __name__ == "__main__":
    main()
