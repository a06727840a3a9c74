from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from . import bulk, decode, min_id_for
from .fields import SnowflakeField

_M = TypeVar("_M", bound=models.Model, covariant=True)
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class WorkerNode(models.Model):
    """One worker slot of the ID space, leased to one process at a time.

    The lease protocol (docs: "Worker IDs") keeps two holders of a slot from ever issuing the
    same time: ``last_timestamp`` is a reservation written before the holder may issue up to
    it, and a new holder starts above it.
    """

    class NodeType(models.TextChoices):
        ACTUAL = "actual", _("actual machine")
        CONTAINER = "container", _("container")

    worker_id = models.IntegerField(_("worker ID"))
    datacenter_id = models.IntegerField(_("datacenter ID"), default=0)
    host_name = models.CharField(_("host name"), max_length=255)
    process_id = models.IntegerField(_("process ID"))
    label = models.CharField(_("label"), max_length=100, blank=True)
    node_type = models.CharField(
        _("node type"), max_length=10, choices=NodeType.choices, default=NodeType.ACTUAL
    )
    launched_at = models.DateTimeField(_("launched at"))
    heartbeat_at = models.DateTimeField(_("heartbeat at"))
    lease_expires_at = models.DateTimeField(_("lease expires at"))
    released_at = models.DateTimeField(_("released at"), null=True, blank=True)
    last_timestamp = models.BigIntegerField(
        _("high-water time"), help_text=_("In layout time units since the epoch.")
    )
    clock_sequence = models.IntegerField(_("clock sequence"), default=0)
    layout = models.CharField(_("layout fingerprint"), max_length=100)
    token = models.CharField(_("owner token"), max_length=32)
    incarnation = models.CharField(
        _("database incarnation"),
        max_length=100,
        blank=True,
        default="",
        help_text=_(
            "The database server and history that last wrote the row: a failover or a restore "
            'changes it (docs: "High-availability databases").'
        ),
    )
    incarnation_since = models.DateTimeField(_("incarnation first seen"), null=True, blank=True)

    class Meta:
        verbose_name = _("worker node")
        verbose_name_plural = _("worker nodes")
        ordering = ["datacenter_id", "worker_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["worker_id", "datacenter_id"], name="django_snowflake_unique_slot"
            )
        ]

    def __str__(self) -> str:
        # Translated: it is the title of the row's admin pages.
        return gettext("worker %(worker)s/%(datacenter)s on %(host)s:%(pid)s") % {
            "worker": self.worker_id,
            "datacenter": self.datacenter_id,
            "host": self.host_name,
            "pid": self.process_id,
        }

    def lease_state(self, now: datetime) -> str:
        """``"released"``, ``"expired"`` or ``"active"``: whether a process holds the slot."""
        if self.released_at is not None:
            return "released"
        return "active" if self.lease_expires_at > now else "expired"


class _Filterable(Protocol[_T_co]):
    def filter(self, *args: Any, **kwargs: Any) -> _T_co: ...


class SnowflakeManagerMixin:
    """``created_after``, ``created_before`` and ``created_between``: time filters on the pk.

    Each is a range on the primary key, so it uses the pk index and needs no ``created_at``
    column. An ID records its creation time only to its layout's time unit (1 ms by default,
    10 ms for ``sonyflake``, 1 s for ``baidu``), so a row counts as created after a bound only
    if its whole unit starts at or after it, and before a bound only if its whole unit ends at
    or before it. When a bound falls inside a unit, the rows of that unit, which may have been
    created on either side of it, are returned by neither filter; when it is the start of a
    unit (every whole second is, for the presets), ``created_after(dt)`` and
    ``created_before(dt)`` split the rows between them. Naive datetimes are read in the
    current time zone.

    The methods only call ``self.filter()``, so the mixin fits a custom manager
    (``class OrderManager(SnowflakeManagerMixin, models.Manager)``) as well as a queryset.
    """

    def created_after(self: _Filterable[_T], dt: datetime) -> _T:
        """Rows created at or after ``dt``: those whose time unit starts at or after ``dt``.

        Never a row created before ``dt``; when ``dt`` is inside a unit, that unit's rows are
        left out.
        """
        return self.filter(pk__gte=_first_id_from(dt))

    def created_before(self: _Filterable[_T], dt: datetime) -> _T:
        """Rows created strictly before ``dt``: those whose time unit ends at or before ``dt``.

        Never a row created at or after ``dt``; when ``dt`` is inside a unit, that unit's rows
        are left out.
        """
        return self.filter(pk__lt=min_id_for(dt))

    def created_between(self: _Filterable[_T], start: datetime, end: datetime) -> _T:
        """Rows created at or after ``start`` and strictly before ``end``.

        The rows :meth:`created_after` of ``start`` and :meth:`created_before` of ``end``
        both return.
        """
        return self.filter(pk__gte=_first_id_from(start), pk__lt=min_id_for(end))

    def bulk_load(
        self,
        objs: Iterable[models.Model],
        *,
        batch_size: int | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> int:
        """Write unsaved instances through the database's bulk loader (COPY, LOAD DATA);
        return the row count. See :func:`django_snowflake.bulk.bulk_load`."""
        return bulk.bulk_load(self, objs, batch_size=batch_size, progress=progress)


def _first_id_from(dt: datetime) -> int:
    """The first ID whose time unit starts at or after ``dt`` (naive: the current time zone)."""
    from django.utils import timezone

    from .conf import get_layout

    return get_layout().min_id_from(timezone.make_aware(dt) if timezone.is_naive(dt) else dt)


class SnowflakeQuerySet(SnowflakeManagerMixin, models.QuerySet[_M]):
    """A queryset with the pk-range time filters of :class:`SnowflakeManagerMixin`."""


class SnowflakeManager(models.Manager.from_queryset(SnowflakeQuerySet)):  # type: ignore[misc]
    """The manager of :class:`SnowflakeModel`: ``Order.objects.created_after(dt)``."""


class SnowflakeModel(models.Model):
    """An abstract model whose primary key ``id`` is a Snowflake ID, set at instantiation."""

    id = SnowflakeField(_("ID"), primary_key=True, editable=False)

    objects = SnowflakeManager()

    class Meta:
        abstract = True

    @property
    def created_at(self) -> datetime:
        """When the row was created: the aware UTC datetime its primary key carries."""
        return decode(self.pk).timestamp
