"""Every method of the per-database interface (django_snowflake.vendors.base.Database), called on
a real server: each is implemented or raises NotSupported, which its callers handle.

``CASES`` names each public method with a call that exercises it and checks what it returns;
tests/test_vendors.py runs them on the suite's database and asserts that no method of the
interface is left without a case, test_galera_default.py on a Galera node.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DatabaseError

from django_snowflake.conf import get_layout
from django_snowflake.exceptions import NotSupported
from django_snowflake.vendors.base import Database


def _editor(call: Callable[[Any, Any], Any]) -> Callable[[Database], Any]:
    def run(db: Database) -> Any:
        with db.connection.schema_editor() as editor:
            return call(db, editor)

    return run


def _statements(found: Any) -> None:
    assert isinstance(found, list) and all(isinstance(s, str) for s in found), found


def _now(db: Database) -> None:
    found = db.now()
    assert abs(found - datetime.now(UTC)) < timedelta(seconds=5), found


def _epoch(db: Database) -> None:
    with db.connection.cursor() as cursor:
        cursor.execute(f"SELECT {db.epoch_sql('%s')}", [datetime(2025, 1, 1, tzinfo=UTC)])
        (seconds,) = cursor.fetchone()
    assert abs(float(seconds) - 1735689600) < 1, seconds


def _bulk(db: Database) -> None:
    from django_snowflake.bulk import BulkLoadError, bulk_load
    from tests.testapp.models import Customer

    count = bulk_load(Customer.objects.using(db.alias), [Customer(name="interface")])
    assert count == 1, count
    assert BulkLoadError is not None


def _report(db: Database) -> None:
    found = db.function_report()
    assert found is None or {"database", "installed", "where", "slot", "behind_ms"} <= set(found)
    if db.has_server_function:
        assert found is not None and found["installed"] and found["slot"], found


def _idle_clock(db: Database) -> bool:
    """Only MariaDB's column default has a clock to keep; the suite's role migrated the test
    database (through this node, on Galera), so its event is there, running where the
    server's scheduler is on (CI's starts off: test_clock_event turns it on)."""
    paths = db.keys_paths()
    if paths is None or paths[0] != "default":
        return db.idle_clock() is None
    return db.idle_clock() in (None, "off")


def _clock(db: Database) -> None:
    query = db.clock_sql(get_layout())
    if query is None:
        return
    with db.connection.cursor() as cursor:
        cursor.execute(query)
        cursor.fetchall()


def _count_standbys(db: Database) -> None:
    with db.connection.cursor() as cursor:
        assert db.count_standbys(cursor) in (None, 0)


ERROR = DatabaseError("interface")
KEYED = ("testapp_customer", "id")

#: Each public method of Database -> a call that exercises it on ``db`` and checks the result.
CASES: dict[str, Callable[[Database], Any]] = {
    "for_connection": lambda db: isinstance(type(db).for_connection(db.connection), Database),
    "prepare_connection": lambda db: type(db).prepare_connection(db.connection),
    "function_sql": lambda db: _statements(db.function_sql()),
    "install": _editor(lambda db, editor: db.install(editor)),
    "switch_keys": _editor(lambda db, editor: db.switch_keys(editor, db.key_default())),
    "needs_repair": lambda db: isinstance(db.needs_repair(), bool),
    "repair": _editor(lambda db, editor: db.repair(editor)),
    "function_copies": lambda db: isinstance(db.function_copies(), list),
    "function_schema": lambda db: db.function_schema() in (None, "public"),
    "column_default_sql": lambda db: (
        "django_snowflake_id" in db.column_default_sql(db.key_default)
        or db.column_default_sql() == "0"
    ),
    "key_default": lambda db: db.key_default() is None or isinstance(db.key_default(), str),
    "plain_bigint": lambda db: isinstance(db.plain_bigint(*KEYED), bool),
    "key_default_sql": lambda db: _statements(
        db.key_default_sql(db.connection.ops.quote_name, *KEYED, db.key_default())
    ),
    "key_changed_sql": lambda db: _statements(
        db.key_changed_sql(db.connection.ops.quote_name, KEYED[0], "id", "id", db.key_default())
    ),
    "move_clock": lambda db: db.move_clock(get_layout()) in ("", "moved", "skipped"),
    "clock_sql": _clock,
    # The suite's own role owns the test database: it lacks nothing, and sees its function.
    "missing_grants": lambda db: db.missing_grants() == [],
    "hidden_function": lambda db: db.hidden_function() is None,
    "idle_clock": _idle_clock,
    "installed_comment": lambda db: db.installed_comment() is None or db.has_server_function,
    "function_slot": lambda db: db.function_slot()[0] is db.has_server_function,
    "node_name": lambda db: db.node_name() is None or isinstance(db.node_name(), str),
    "where": lambda db: isinstance(db.where(), str),
    "own_label": lambda db: db.own_label().startswith(f"database:{db.alias}"),
    "stranger": lambda db: db.stranger() is False,
    "unserved": lambda db: db.unserved() is False,
    "nodes_report": lambda db: isinstance(db.nodes_report(), list),
    "keys_paths": lambda db: db.keys_paths() is None or len(db.keys_paths() or ()) == 2,
    "now": _now,
    "epoch_sql": _epoch,
    "incarnation": lambda db: isinstance(db.incarnation()[0], str),
    "asynchronous_standbys": lambda db: db.asynchronous_standbys() in (None, 0),
    "count_standbys": _count_standbys,
    "is_conflict": lambda db: db.is_conflict(ERROR) is False,
    "after_conflict": lambda db: db.after_conflict(),
    "lock_hint": lambda db: db.lock_hint(ERROR) == "",
    "not_supported": lambda db: db.alias in str(db.not_supported("Nothing")),
    "bulk_loader": _bulk,
    "function_report": _report,
}


def public_methods() -> set[str]:
    """Every public method the interface declares."""
    return {
        name
        for name in vars(Database)
        if not name.startswith("_") and callable(getattr(Database, name))
    }


def exercise(db: Database, name: str) -> str:
    """Run ``name``'s case on ``db``: ``"implemented"``, or ``"not supported"`` when it raised
    NotSupported (a named error its callers handle). A case that returns ``False`` fails."""
    try:
        result = CASES[name](db)
    except NotSupported:
        return "not supported"
    assert result is not False, f"{type(db).__name__}.{name} returned what it must not"
    return "implemented"
