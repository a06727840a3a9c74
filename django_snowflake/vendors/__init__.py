"""One interface per database: :class:`.base.Database`, implemented once per vendor.

:func:`database` is the one lookup, as Django's ``connection.ops`` is chosen once per backend:
PostgreSQL (:mod:`.postgresql`), MariaDB and MySQL (:mod:`.mysql`), a Galera node (:mod:`.galera`,
MariaDB's subclass for what is per node) and SQLite (:mod:`.sqlite`). No other module asks
which database a connection is on: it asks the object this returns. Which insert takes which
path is decided in :mod:`django_snowflake.database_keys`.
"""

from __future__ import annotations

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.connection import ConnectionProxy

from .base import Database
from .galera import Galera, node_name
from .mysql import MariaDB
from .postgresql import PostgreSQL
from .sqlite import SQLite

#: Django's ``connection.vendor`` -> the class of its database.
CLASSES: dict[str, type[Database]] = {"postgresql": PostgreSQL, "mysql": MariaDB, "sqlite": SQLite}


def database_class(connection: BaseDatabaseWrapper) -> type[Database]:
    """The class of ``connection``'s database, without a query (:class:`Database` itself for a
    backend the package does not know: every method answers its neutral value)."""
    return CLASSES.get(connection.vendor, Database)


def database(connection: BaseDatabaseWrapper) -> Database:
    """The :class:`Database` of ``connection``: the one lookup. Kept on the connection for as
    long as its server connection lives (a Galera node is told by a query)."""
    if isinstance(connection, ConnectionProxy):  # django.db.connection: its wrapper
        connection = connections[connection.alias]
    raw = connection.connection
    cached = getattr(connection, "_snowflake_database", None)
    if cached is not None and raw is not None and cached[0] is raw:
        found: Database = cached[1]
        return found
    found = database_class(connection).for_connection(connection)
    if isinstance(found, MariaDB) and (node := node_name(connection)) is not None:
        found = Galera(connection, node)  # MariaDB's variant for what is per node
    connection._snowflake_database = (connection.connection, found)  # type: ignore[attr-defined]
    return found


def installed_slot(alias: str) -> tuple[bool, tuple[int, int] | None]:
    """Whether database ``alias`` has the function, and the slot its comment names."""
    return database(connections[alias]).function_slot()
