"""The per-database interface on the suite's real database (SQLite, PostgreSQL or MariaDB):
every method is implemented or raises NotSupported (docs/architecture.rst, "Adding a
database"). Galera's class runs the same cases in test_galera_default.py."""

from __future__ import annotations

import pytest
from django.db import connection

from django_snowflake.exceptions import NotSupported
from django_snowflake.vendors import database, database_class

from .interface import CASES, exercise, public_methods

#: What each database does not support, by class: everything else must be implemented.
NOT_SUPPORTED = {
    "SQLite": {"switch_keys"},
    "PostgreSQL": {"switch_keys"},
    "MariaDB": set(),
}


def test_every_method_of_the_interface_has_a_case() -> None:
    assert public_methods() == set(CASES)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_method_on_the_real_database(name: str) -> None:
    db = database(connection)
    expected = "not supported" if name in NOT_SUPPORTED[type(db).__name__] else "implemented"
    assert exercise(db, name) == expected


@pytest.mark.django_db
def test_the_lookup_is_made_once_per_connection() -> None:
    with connection.cursor():
        pass
    assert database(connection) is database(connection)
    assert isinstance(database(connection), database_class(connection))


@pytest.mark.django_db
def test_not_supported_names_the_database_and_what() -> None:
    db = database(connection)
    error = db.not_supported("Switching the path of keys")
    assert isinstance(error, NotSupported)
    assert db.display_name in str(error) and repr(db.alias) in str(error)
