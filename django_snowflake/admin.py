"""Admin integration: decoded creation times, a pk-range date filter, and the worker table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import formats, timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from . import decode, min_id_for
from .models import WorkerNode

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

CREATED = "snowflake_created"
BREAKDOWN = (
    "snowflake_id",
    "snowflake_worker",
    "snowflake_datacenter",
    "snowflake_sequence",
    "snowflake_clock_sequence",
)


def _part(name: str, description: StrOrPromise) -> Callable[[Any, Model], int]:
    """A read-only admin field showing one decoded part of the object's primary key."""

    @admin.display(description=description)
    def show(self: Any, obj: Model) -> int:
        value: int = getattr(decode(obj.pk), name)
        return value

    return show


class SnowflakeAdminMixin:
    """For the ``ModelAdmin`` of a model with a Snowflake primary key.

    * the changelist gets a "created" column (the time decoded from the pk, shown in the
      current time zone and locale like any admin datetime, sortable) after the
      ``list_display`` columns, and is ordered newest first unless the admin or the model
      sets an ordering;
    * the change page gets a read-only "Snowflake ID" section: creation time, worker,
      datacenter, sequence and clock sequence.

    Put it before ``admin.ModelAdmin``: ``class OrderAdmin(SnowflakeAdminMixin, admin.ModelAdmin)``.
    """

    snowflake_id = _part("id", _("ID"))
    snowflake_worker = _part("worker_id", _("worker"))
    snowflake_datacenter = _part("datacenter_id", _("datacenter"))
    snowflake_sequence = _part("sequence", _("sequence"))
    snowflake_clock_sequence = _part("clock_sequence", _("clock sequence"))

    @admin.display(description=_("created"), ordering="pk")
    def snowflake_created(self, obj: Model) -> str:
        """The time in the key, in the current time zone and the active locale's format."""
        return formats.localize(timezone.localtime(decode(obj.pk).timestamp))

    def get_list_display(self, request: HttpRequest) -> Sequence[Any]:
        columns = list(super().get_list_display(request))  # type: ignore[misc]
        if CREATED not in columns:
            columns.append(CREATED)
        return columns

    def get_ordering(self, request: HttpRequest) -> Sequence[str]:
        ordering = super().get_ordering(request)  # type: ignore[misc]
        return ordering or self.model._meta.ordering or ["-pk"]  # type: ignore[attr-defined]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Sequence[str]:
        fields = list(super().get_readonly_fields(request, obj))  # type: ignore[misc]
        if obj is not None:
            fields += [CREATED, *BREAKDOWN]
        return fields

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> Sequence[Any]:
        # The breakdown goes into its own fieldset (below), not the main one.
        fields = super().get_fields(request, obj)  # type: ignore[misc]
        return [field for field in fields if field not in (CREATED, *BREAKDOWN)]

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> list[Any]:
        fieldsets = list(super().get_fieldsets(request, obj))  # type: ignore[misc]
        if obj is not None:
            fieldsets.append((_("Snowflake ID"), {"fields": [CREATED, *BREAKDOWN]}))
        return fieldsets


class SnowflakeCreatedFilter(admin.SimpleListFilter):
    """Filter a changelist by creation time: Today, Past 7 days, This month, This year.

    Each choice is a range on the primary key, so it uses the pk index. Days, months and
    years start at midnight in the current time zone.
    """

    title = _("creation date")
    parameter_name = "created"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [
            ("today", _("Today")),
            ("past_7_days", _("Past 7 days")),
            ("this_month", _("This month")),
            ("this_year", _("This year")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        value = self.value()
        if value is None:
            return None
        today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
        tomorrow = _local_midnight(today + timedelta(days=1))
        starts = {
            "today": today,
            "past_7_days": _local_midnight(today - timedelta(days=7)),
            "this_month": today.replace(day=1),
            "this_year": today.replace(month=1, day=1),
        }
        if value not in starts:
            return None
        return queryset.filter(pk__gte=min_id_for(starts[value]), pk__lt=min_id_for(tomorrow))


def _local_midnight(dt: datetime) -> datetime:
    """Midnight of ``dt``'s date in the current time zone (correct across DST changes)."""
    return timezone.make_aware(datetime.combine(dt.date(), datetime.min.time()))


LEASE_STATES = {"active": _("active"), "expired": _("expired"), "released": _("released")}


class LeaseStateFilter(admin.SimpleListFilter):
    title = _("lease state")
    parameter_name = "lease"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return list(LEASE_STATES.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        now = timezone.now()
        conditions = {
            "released": Q(released_at__isnull=False),
            "expired": Q(released_at__isnull=True, lease_expires_at__lte=now),
            "active": Q(released_at__isnull=True, lease_expires_at__gt=now),
        }
        value = self.value()
        return queryset.filter(conditions[value]) if value in conditions else None


@admin.register(WorkerNode)
class WorkerNodeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The worker slots, read-only: the package writes them, people only look.

    A row may be deleted only once its lease expired or was released, and the confirmation
    page says why even that deserves care.
    """

    list_display = [
        "worker_id",
        "datacenter_id",
        "host_name",
        "process_id",
        "label",
        "lease",
        "heartbeat_age",
    ]
    list_filter = [LeaseStateFilter, "label", "host_name"]
    search_fields = ["host_name", "label"]
    actions = None  # no bulk delete: each row's lease is judged on its own

    @admin.display(description=_("lease"))
    def lease(self, obj: WorkerNode) -> str:
        return str(LEASE_STATES[obj.lease_state(timezone.now())])

    @admin.display(description=_("last heartbeat"), ordering="heartbeat_at")
    def heartbeat_age(self, obj: WorkerNode) -> str:
        now = timezone.now()
        seconds = int((now - obj.heartbeat_at).total_seconds())
        if seconds < 60:
            age = ngettext("%(count)d second", "%(count)d seconds", seconds) % {"count": seconds}
        else:
            age = timesince(obj.heartbeat_at, now)
        return str(_("%(age)s ago") % {"age": age})

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: WorkerNode | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: WorkerNode | None = None) -> bool:
        if obj is not None and obj.lease_state(timezone.now()) == "active":
            return False
        return super().has_delete_permission(request, obj)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {
            "snowflake_delete_warning": _(
                "This row remembers the highest time its worker ID has issued IDs up to. "
                "Delete it only if the process that held it is gone for good: the next "
                "process to claim this worker ID starts from its own clock, and deleting the "
                "row of a live worker, or of one whose host clock runs ahead, breaks the "
                "guarantee that every ID is unique, like resetting a sequence."
            ),
            **(extra_context or {}),
        }
        return super().delete_view(request, object_id, extra_context)
