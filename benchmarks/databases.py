"""Creating, copying and dropping the benchmark databases, and measuring table sizes."""

from __future__ import annotations

import shutil
from contextlib import closing
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from .common import log

SERVERS = ("postgresql", "mariadb")


def _admin_postgresql() -> Any:
    import psycopg

    conf = settings.DATABASES["postgresql"]
    return psycopg.connect(
        host=conf["HOST"],
        port=conf["PORT"],
        user=conf["USER"],
        password=conf["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )


def _admin_mariadb() -> Any:
    import MySQLdb

    conf = settings.DATABASES["mariadb"]
    connection = MySQLdb.connect(
        host=conf["HOST"], port=int(conf["PORT"]), user=conf["USER"], password=conf["PASSWORD"]
    )
    connection.autocommit(True)
    return connection


def postgresql(statement: str) -> None:
    """Run ``statement`` on the PostgreSQL server's ``postgres`` database, in autocommit."""
    with closing(_admin_postgresql()) as admin:
        admin.execute(statement)


def create(aliases: list[str]) -> None:
    """Fresh, empty benchmark databases, with the WorkerNode table, for ``aliases``."""
    for alias in ["default", *aliases]:
        connections[alias].close()
        conf = settings.DATABASES[alias]
        if alias == "default" or alias == "sqlite":
            settings.BENCH_DIR.mkdir(parents=True, exist_ok=True)
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(conf["NAME"] + suffix).unlink(missing_ok=True)
        elif alias == "postgresql":
            postgresql(f'DROP DATABASE IF EXISTS "{conf["NAME"]}" WITH (FORCE)')
            postgresql(f'CREATE DATABASE "{conf["NAME"]}"')
        elif alias == "mariadb":
            with closing(_admin_mariadb()) as admin, closing(admin.cursor()) as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{conf['NAME']}`")
                cursor.execute(
                    f"CREATE DATABASE `{conf['NAME']}` CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci"
                )
        call_command("migrate", "django_snowflake", database=alias, verbosity=0)
        log(f"database {alias}: {conf['NAME']} created")


def drop(aliases: list[str]) -> None:
    for alias in aliases:
        connections[alias].close()
    connections["default"].close()
    if "postgresql" in aliases:
        name = settings.DATABASES["postgresql"]["NAME"]
        postgresql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if "mariadb" in aliases:
        with closing(_admin_mariadb()) as admin, closing(admin.cursor()) as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{settings.DATABASES['mariadb']['NAME']}`")
    shutil.rmtree(settings.BENCH_DIR, ignore_errors=True)


def server_facts(aliases: list[str]) -> dict[str, Any]:
    """Server versions and the settings that decide insert and commit speed."""
    facts: dict[str, Any] = {}
    if "postgresql" in aliases:
        with closing(_admin_postgresql()) as admin:
            facts["postgresql"] = {
                name: admin.execute(f"SHOW {name}").fetchone()[0]
                for name in (
                    "server_version",
                    "shared_buffers",
                    "fsync",
                    "synchronous_commit",
                    "wal_level",
                    "max_connections",
                )
            }
    if "mariadb" in aliases:
        with closing(_admin_mariadb()) as admin, closing(admin.cursor()) as cursor:
            cursor.execute(
                "SHOW VARIABLES WHERE Variable_name IN ('version', 'innodb_buffer_pool_size', "
                "'innodb_flush_log_at_trx_commit', 'innodb_doublewrite', 'log_bin', "
                "'max_connections')"
            )
            facts["mariadb"] = dict(cursor.fetchall())
    if "sqlite" in aliases:
        with connections["sqlite"].cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            synchronous = cursor.fetchone()[0]
        facts["sqlite"] = {"journal_mode": journal, "synchronous": synchronous}
    return facts


def recreate_table(model: Any, alias: str) -> None:
    connection = connections[alias]
    table = model._meta.db_table
    with connection.schema_editor() as editor:
        if table in connection.introspection.table_names():
            editor.delete_model(model)
        editor.create_model(model)


def checkpoint(alias: str) -> None:
    """Start each timed load with no dirty pages of the previous one left to write."""
    if connections[alias].vendor == "postgresql":
        with connections[alias].cursor() as cursor:
            cursor.execute("CHECKPOINT")


def sizes(model: Any, alias: str) -> dict[str, int]:
    """Bytes on disk after a load: the table, its primary key index, and both together.

    PostgreSQL: heap, pk index, total. MariaDB (InnoDB): the table *is* its clustered pk
    index, so ``pk_index`` is ``data_length`` and ``table`` the same. SQLite: the table's
    b-tree and its pk index (none when the key is the rowid), from ``dbstat``.
    """
    connection = connections[alias]
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_relation_size(%s), pg_indexes_size(%s), pg_total_relation_size(%s)",
                [table, table, table],
            )
            heap, index, total = cursor.fetchone()
            return {"table": heap, "pk_index": index, "total": total}
        if connection.vendor == "mysql":
            cursor.execute(f"ANALYZE TABLE `{table}`")
            cursor.fetchall()
            cursor.execute(
                "SELECT data_length, index_length FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = %s",
                [table],
            )
            data, secondary = cursor.fetchone()
            return {"table": data, "pk_index": data, "total": data + secondary}
        cursor.execute(f'PRAGMA index_list("{table}")')
        indexes = [row[1] for row in cursor.fetchall()]
        placeholders = ", ".join(["%s"] * (len(indexes) + 1))
        cursor.execute(
            f"SELECT name, SUM(pgsize) FROM dbstat WHERE name IN ({placeholders}) GROUP BY name",
            [table, *indexes],
        )
        found = dict(cursor.fetchall())
        index = sum(found.get(name, 0) for name in indexes)
        return {
            "table": found.get(table, 0),
            "pk_index": index,
            "total": found.get(table, 0) + index,
        }


def use_database(alias: str, name: str) -> None:
    """Point ``alias`` at database ``name`` (closing its connection first)."""
    connections[alias].close()
    connections[alias].settings_dict["NAME"] = name
