"""``bulk_load``: the batches, the transaction, the errors, and the choice of loader.

A load reads its instances ``batch_size`` at a time, turns each batch into rows
(:mod:`~django_snowflake.bulk.plan`) and hands them to the database's loader
(:mod:`~django_snowflake.bulk.base`), all in one transaction (``transaction.atomic``), so a
generator of instances is consumed with flat memory and a failure leaves nothing behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from operator import attrgetter
from typing import Any

from django.db import DatabaseError, connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..exceptions import BulkLoadError, NotSupported
from ..vendors import database
from .base import Loader, loaded
from .plan import Plan, Row, check_model, groups, prepare

#: Rows per batch when ``batch_size`` is not given: large enough that the per-batch round
#: trips vanish, small enough that a batch of instances stays a few megabytes.
DEFAULT_BATCH_SIZE = 10_000

Progress = Callable[[int], object]


def bulk_load(
    model_or_queryset: Any,
    objs: Iterable[models.Model],
    *,
    batch_size: int | None = None,
    progress: Progress | None = None,
) -> int:
    """Write unsaved instances through the database's bulk loader; return the row count.

    ``model_or_queryset`` is a model class (written to ``router.db_for_write``), a manager or
    a queryset (written to its ``using()`` database). ``objs`` is any iterable of instances
    of that model, consumed ``batch_size`` (default :data:`DEFAULT_BATCH_SIZE`) at a time, so
    a generator keeps memory flat.
    ``progress(rows_done)`` is called after every batch.

    The rows stored are the ones ``bulk_create`` would store. The whole load is one
    transaction (a savepoint inside an outer one): on any error nothing of it stays, and the
    error, of the class the database raised (``IntegrityError``, ``DataError``, ...), names
    the row (its index in ``objs`` and its pk) where the database lets it be found.
    No signals are sent and nothing is read back (no ``RETURNING``: a ``db_default`` value
    is not set on the instance); each loaded instance is marked saved
    (``_state.adding = False``, ``_state.db`` the alias).

    Raises :class:`~django_snowflake.exceptions.BulkLoadError` (a ``ValueError``) for
    multi-table inheritance, a primary key the database numbers, an object of another class,
    or an instance without a key.
    """
    model, alias = _resolve(model_or_queryset)
    check_model(model)
    if batch_size is not None and batch_size <= 0:
        raise BulkLoadError(f"bulk_load: batch_size must be positive, not {batch_size}.")
    size = batch_size or DEFAULT_BATCH_SIZE
    connection = connections[alias]
    loader_cls = loader_class(connection)
    plan = Plan(model, connection)
    with transaction.atomic(using=alias):
        loader = loader_cls(plan)
        load = _Load(loader, alias, progress)
        batches = _batches(objs, size)
        try:
            prepared = load.prepare(next(batches, None))
            while prepared is not None:
                # The next batch is taken before the write begins: making it runs the
                # caller's code, which may query this connection.
                following = next(batches, None)
                load.write(prepared)
                prepared = load.prepare(following)
                load.wait()
        except BaseException:
            load.abandon()  # a COPY left open would refuse the rollback
            raise
        savepoint = _savepoint(loader) if plan.foreign_keys else None
        try:
            loader.finish()
        except DatabaseError as exc:
            # Back to before the check, so the offending row can still be looked up.
            if savepoint is not None:
                transaction.savepoint_rollback(savepoint, using=alias)
            where = loader.foreign_key_row(exc)
            raise _describe(plan, exc, f"the foreign key check of {where or 'its rows'}") from exc
    return load.done


def _resolve(model_or_queryset: Any) -> tuple[type[models.Model], str]:
    if isinstance(model_or_queryset, models.QuerySet):
        model = model_or_queryset.model
        using: str | None = getattr(model_or_queryset, "_db", None)
        return model, using or router.db_for_write(model)
    if isinstance(model_or_queryset, models.Manager):
        model = model_or_queryset.model
        return model, model_or_queryset._db or router.db_for_write(model)
    if isinstance(model_or_queryset, type) and issubclass(model_or_queryset, models.Model):
        return model_or_queryset, router.db_for_write(model_or_queryset)
    raise TypeError(
        f"bulk_load() takes a model class, manager or queryset, not {model_or_queryset!r}."
    )


def _batches(objs: Iterable[models.Model], size: int) -> Iterator[list[models.Model]]:
    iterator = iter(objs)
    while batch := list(islice(iterator, size)):
        yield batch


def loader_class(connection: BaseDatabaseWrapper) -> type[Loader]:
    """The loader class of ``connection``'s database, as its per-database interface names it
    (:meth:`django_snowflake.vendors.base.Database.bulk_loader`).

    Raises :class:`~django_snowflake.exceptions.BulkLoadError` for a database without one.
    """
    try:
        loader: type[Loader] = database(connection).bulk_loader()
    except NotSupported:
        raise BulkLoadError(
            f"bulk_load has no loader for the {connection.display_name} backend of database "
            f"{connection.alias!r}; use bulk_create()."
        ) from None
    return loader


#: A batch ready to write: the index of its first instance, the instances, their rows.
_Prepared = tuple[int, list[models.Model], list[Row]]


class _Load:
    """The batches of one ``bulk_load()``, prepared and written in turn.

    Where preparing a batch stays off the connection (``Plan.prepares_offline``), the next
    batch is prepared while the server still loads the rows sent, and the end of the write
    is awaited only then: the server and Python work at once instead of by turns.
    """

    def __init__(self, loader: Loader, alias: str, progress: Progress | None) -> None:
        self.loader = loader
        self.plan = loader.plan
        self.alias = alias
        self.progress = progress
        self.taken = 0
        self.done = 0
        self._end: Callable[[], None] = loaded
        self._batch: list[models.Model] = []

    def prepare(self, batch: list[models.Model] | None) -> _Prepared | None:
        if batch is None:
            return None
        first, self.taken = self.taken, self.taken + len(batch)
        return first, batch, prepare(self.plan, batch, first)

    def write(self, prepared: _Prepared) -> None:
        first, batch, rows = prepared
        end = loaded
        for positions, indexes in groups(self.plan, rows):
            end()  # one write at a time on a connection
            group = rows if len(indexes) == len(rows) else [rows[i] for i in indexes]
            end = _begin(self.loader, positions, group, rows, indexes, first, self.alias)
        self._end, self._batch = end, batch
        if not self.plan.prepares_offline:
            self.wait()

    def wait(self) -> None:
        """Wait for the batch being loaded, if any, and mark its instances saved."""
        end, batch = self._end, self._batch
        self._end, self._batch = loaded, []
        end()
        if not batch:
            return
        for state in map(attrgetter("_state"), batch):
            state.adding = False
            state.db = self.alias
        self.done += len(batch)
        if self.progress is not None:
            self.progress(self.done)

    def abandon(self) -> None:
        """End the write of the batch being loaded, if any, without marking it saved."""
        end = self._end
        self._end, self._batch = loaded, []
        with contextlib.suppress(DatabaseError):
            end()


def _begin(
    loader: Loader,
    positions: list[int],
    group: list[Row],
    rows: list[Row],
    indexes: Sequence[int],
    first: int,
    alias: str,
) -> Callable[[], None]:
    """Start writing ``group`` in a savepoint; the function returned waits for the end.

    Either raises, if the database refuses a row, an error naming the row.
    """
    savepoint = _savepoint(loader)

    def failed(exc: DatabaseError) -> DatabaseError:
        if savepoint is None:
            return _describe(loader.plan, exc, "a batch")
        # Find the row: roll the batch back, insert its rows one by one, stop at the first
        # failure, and roll that back too (the load's transaction is rolled back by the raise).
        transaction.savepoint_rollback(savepoint, using=alias)
        found = _locate(loader, positions, rows, list(indexes))
        transaction.savepoint_rollback(savepoint, using=alias)
        plan = loader.plan
        if found is None:
            return _describe(plan, exc, "a batch")
        index, error = found
        pk = rows[index][plan.pk_position]
        return _describe(plan, error, f"row {first + index} (pk {pk})")

    try:
        end = loader.begin(positions, group)
    except DatabaseError as exc:
        raise failed(exc) from exc

    def finish() -> None:
        try:
            end()
        except DatabaseError as exc:
            raise failed(exc) from exc
        if savepoint is not None:
            transaction.savepoint_commit(savepoint, using=alias)

    return finish


def _savepoint(loader: Loader) -> str | None:
    """A savepoint, or ``None`` where the database refused one and the loader can do without
    (:attr:`~django_snowflake.bulk.base.Loader.savepoints_optional`)."""
    try:
        # The connection's own savepoint(), which transaction.savepoint() (deprecated in Django
        # 6.1) and its replacement savepoint_create() (new in 6.1) both call.
        return loader.connection.savepoint()
    except DatabaseError:
        if not loader.savepoints_optional:
            raise
        return None


def _locate(
    loader: Loader, positions: list[int], rows: list[Row], indexes: list[int]
) -> tuple[int, DatabaseError] | None:
    """Insert ``rows`` one at a time until one fails: (its index, the error), or ``None``."""
    connection = loader.connection
    sql = loader.insert_sql(positions)
    with connection.cursor() as cursor:
        for index in indexes:
            row = rows[index]
            try:
                cursor.execute(sql, [row[n] for n in positions])
            except DatabaseError as exc:
                return index, exc
    return None


def _describe(plan: Plan, error: DatabaseError, where: str) -> DatabaseError:
    """An error of the same class as ``error`` whose message says which row failed."""
    label = plan.model._meta.label
    described = type(error)(f"bulk_load of {label} rolled back: {where} failed: {error}")
    return described
