"""Admin integration: decoded creation times, a pk-range date filter, and the worker table."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.db import connections
from django.db.models import Case, Field, Model, Q, QuerySet, Value, When
from django.db.models.expressions import Combinable
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timesince
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from . import decode, min_id_for
from .conf import get_layout
from .database_keys import function_report
from .database_slots import DATABASE_HOST, LEASE_END
from .layout import MAX_BITS, BitLayout, ms_to_datetime
from .models import WorkerNode
from .slots import database_alias, function_in_words, reserved_for

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

    # mypy checks the mixin as the ModelAdmin it is mixed into, so its super() calls and
    # self.model are typed. At run time ModelAdmin takes no type argument and the mixin is
    # a plain class, put before admin.ModelAdmin in the bases.
    _MixinBase = admin.ModelAdmin[Any]
    _WorkerNodeAdminBase = admin.ModelAdmin[WorkerNode]
else:
    _MixinBase = object
    _WorkerNodeAdminBase = admin.ModelAdmin

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


class SnowflakeAdminMixin(_MixinBase):
    """For the ``ModelAdmin`` of a model with a Snowflake primary key.

    * the changelist gets a "created" column (the time decoded from the pk, shown in the
      current time zone and locale like any admin datetime, sortable) after the
      ``list_display`` columns, and is ordered newest first unless the admin or the model
      sets an ordering;
    * the change page gets a read-only "Snowflake ID" section: creation time, worker,
      datacenter, sequence and clock sequence;
    * the search box finds rows by ID: a search of one or more IDs (separated by spaces or
      commas) finds those rows, besides what the admin's own ``search_fields`` find; without
      ``search_fields`` the box is there for IDs alone, and a search that is not all IDs finds
      nothing.

    Put it before ``admin.ModelAdmin``: ``class OrderAdmin(SnowflakeAdminMixin, admin.ModelAdmin)``.
    """

    snowflake_id = _part("id", _("ID"))
    snowflake_worker = _part("worker_id", _("worker"))
    snowflake_datacenter = _part("datacenter_id", _("datacenter"))
    snowflake_sequence = _part("sequence", _("sequence"))
    snowflake_clock_sequence = _part("clock_sequence", _("clock sequence"))

    @admin.display(description=_("created"), ordering="pk")
    def snowflake_created(self, obj: Model) -> SafeString:
        """The time in the key to the second, in the current time zone and the active locale's
        date format; the exact time, to the millisecond, on hover."""
        return time_with_milliseconds(decode(obj.pk).timestamp)

    def get_list_display(self, request: HttpRequest) -> list[str | Callable[[Any], str | bool]]:
        columns = list(super().get_list_display(request))
        if CREATED not in columns:
            columns.append(CREATED)
        return columns

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        return list(super().get_ordering(request) or self.model._meta.ordering or ["-pk"])

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields += [CREATED, *BREAKDOWN]
        return fields

    def get_search_fields(self, request: HttpRequest) -> list[str]:
        # Something, so that the changelist shows its search box; get_search_results() never
        # hands SEARCH_BY_ID to Django's search, which would compare the key as text.
        return list(super().get_search_fields(request)) or [SEARCH_BY_ID]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        keys = snowflake_keys(search_term)
        if self.get_search_fields(request) != [SEARCH_BY_ID]:
            found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        elif search_term.strip():
            found, may_have_duplicates = queryset.none(), False
        else:
            return queryset, False
        if not keys:
            return found, may_have_duplicates
        # A subquery rather than `|`: Django's search may have added aliases and joins.
        return queryset.filter(Q(pk__in=keys) | Q(pk__in=found.values("pk"))), may_have_duplicates

    def get_fields(
        self, request: HttpRequest, obj: Model | None = None
    ) -> list[str | list[str] | tuple[str, ...]]:
        # The breakdown goes into its own fieldset (below), not the main one.
        fields = super().get_fields(request, obj)
        return [field for field in fields if field not in (CREATED, *BREAKDOWN)]

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> list[Any]:
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is not None:
            fieldsets.append((_("Snowflake ID"), {"fields": [CREATED, *BREAKDOWN]}))
        return fieldsets


SEARCH_BY_ID = "pk"
_ID = re.compile(r"[0-9]{1,19}")


def snowflake_keys(search_term: str) -> list[int]:
    """The IDs of a search (digits, separated by spaces or commas), or ``[]`` when some word of
    it is not one: a malformed or too large ID is a search that finds nothing by ID."""
    words = search_term.replace(",", " ").split()
    keys = [int(word) for word in words if _ID.fullmatch(word)]
    if len(keys) < len(words) or any(key >= 1 << MAX_BITS for key in keys):
        return []
    return keys


def time_with_milliseconds(dt: datetime) -> SafeString:
    """``dt`` in the current time zone, to the second, in the active locale's date format,
    inside a ``<span class="nowrap">`` whose ``title`` (shown on hover) is the ISO-8601 time
    to the millisecond with its UTC offset."""
    local = timezone.localtime(dt)
    shown = f"{formats.date_format(local, 'DATE_FORMAT')} {formats.time_format(local, 'H:i:s')}"
    # "nowrap", as Django's changelist marks its own date and time cells: broken over two
    # lines, a date and its time read as two values.
    return format_html(
        '<span class="nowrap" title="{}">{}</span>', local.isoformat(timespec="milliseconds"), shown
    )


def _moment_or(dt: datetime | None, missing: str) -> SafeString | str:
    """:func:`time_with_milliseconds` of a moment the row may not have recorded."""
    return missing if dt is None else time_with_milliseconds(dt)


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


# The filter's choices, in the list's default order: live slots first, then the rows a claim
# may reuse.
LEASE_STATES = {
    "active": _("Active"),
    "database": _("Database function"),
    "expired": _("Expired"),
    "released": _("Released"),
}
# The lease column says what will become of a row that no process holds: the next claim may
# take it (a claim that does makes it active again, so no row reads as reused).
LEASE_CELLS = {
    **LEASE_STATES,
    "expired": _("Expired: free for the next claim"),
    "released": _("Released: free for the next claim"),
}


def lease_conditions(now: datetime) -> dict[str, Q]:
    """Each lease state as a filter, at ``now``."""
    live = Q(released_at__isnull=True, lease_expires_at__gt=now)
    database = Q(host_name=DATABASE_HOST)
    return {
        "active": live & ~database,
        "database": live & database,
        "expired": Q(released_at__isnull=True, lease_expires_at__lte=now),
        "released": Q(released_at__isnull=False),
    }


def lease_state(node: WorkerNode, now: datetime) -> str:
    """``WorkerNode.lease_state()``, with a database function's slot told apart."""
    state = node.lease_state(now)
    return "database" if state == "active" and database_alias(node) is not None else state


class LeaseStateFilter(admin.SimpleListFilter):
    title = _("lease state")
    parameter_name = "lease"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return list(LEASE_STATES.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        conditions = lease_conditions(timezone.now())
        value = self.value()
        return queryset.filter(conditions[value]) if value in conditions else None


def _row_layout(node: WorkerNode) -> BitLayout:
    """The layout the row was written under; the configured one if its fingerprint is odd."""
    try:
        return BitLayout.from_fingerprint(node.layout)
    except ValueError:
        return get_layout()


def _field_name(name: str) -> Any:
    field = cast("Field[Any, Any]", WorkerNode._meta.get_field(name))
    return field.verbose_name


@admin.register(WorkerNode)
class WorkerNodeAdmin(_WorkerNodeAdminBase):
    """The worker slots, read-only: the package writes them, people only look.

    The list puts live slots first (processes', then databases' functions'), then the
    expired and released rows the next claims may take. A row may be deleted only once its lease
    expired or was released; for an active row the delete page says why not and links back,
    and the confirmation page of the others says why even that deserves care.
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

    def get_ordering(self, request: HttpRequest) -> list[Any]:
        # One column key: Meta.ordering's two would put sort-priority numbers on two columns.
        conditions = lease_conditions(timezone.now())
        rank = Case(
            *(When(conditions[state], then=Value(i)) for i, state in enumerate(LEASE_STATES)),
            default=Value(len(LEASE_STATES)),
        )
        return [rank.asc(), "worker_id"]

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        columns = list(super().get_list_display(request))
        if not get_layout().datacenter_bits:
            # Every row says 0: the column would only take width from the others.
            columns.remove("datacenter_id")
        return columns

    def get_fieldsets(self, request: HttpRequest, obj: WorkerNode | None = None) -> list[Any]:
        # SQLite has no incarnation: then a "first seen" beside it would contradict it.
        database = ["incarnation_in_words"]
        if obj is not None and obj.incarnation:
            database.append("incarnation_seen")
        return [
            (
                _("Slot"),
                {
                    "fields": [
                        "worker_id",
                        "datacenter_id",
                        "lease",
                        "label",
                        "host_name",
                        "process_id",
                        "node_type",
                        *(["database_function"] if obj and database_alias(obj) else []),
                    ]
                },
            ),
            (
                _("Lease"),
                {"fields": ["launched", "heartbeat", "lease_expires", "released"]},
            ),
            (
                _("Time and layout"),
                {"fields": ["high_water", "clock_sequence", "layout_in_words", *database]},
            ),
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: WorkerNode | None = None) -> list[str]:
        return [
            "lease",
            "launched",
            "heartbeat",
            "lease_expires",
            "released",
            "high_water",
            "layout_in_words",
            "incarnation_in_words",
            "incarnation_seen",
            "database_function",
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)
        if obj is not None and database_alias(obj) is not None:
            # Not "worker 1023/0 on (database):0", which reads as a process.
            subtitle = gettext("worker %(worker)s/%(datacenter)s, %(reserved)s") % {
                "worker": obj.worker_id,
                "datacenter": obj.datacenter_id,
                "reserved": reserved_for(database_alias(obj) or ""),
            }
            extra_context = {"subtitle": subtitle, **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description=_("database function"))
    def database_function(self, obj: WorkerNode) -> str:
        """Where the function of the database holding this slot lives, the slot it issues
        under and how far its clock is behind the server's, as ``show_worker`` says."""
        alias = database_alias(obj) or ""
        found = function_report(alias) if alias in connections else None
        if found is None:
            return gettext(
                "not readable here: %(alias)s is no PostgreSQL or MariaDB database of DATABASES"
            ) % {"alias": repr(alias)}
        return function_in_words(found)

    @admin.display(description=_("lease"))
    def lease(self, obj: WorkerNode) -> str:
        alias = database_alias(obj)
        if alias is not None and obj.released_at is None:
            return reserved_for(alias)
        return str(LEASE_CELLS[lease_state(obj, timezone.now())])

    @admin.display(description=_("last heartbeat"), ordering="heartbeat_at")
    def heartbeat_age(self, obj: WorkerNode) -> str:
        if database_alias(obj) is not None:
            return gettext("none: a database function does not renew")
        now = timezone.now()
        seconds = int((now - obj.heartbeat_at).total_seconds())
        if seconds < 60:
            age = ngettext("%(count)d second", "%(count)d seconds", seconds) % {"count": seconds}
        else:
            age = timesince(obj.heartbeat_at, now, depth=1)
        return gettext("%(age)s ago") % {"age": age}

    # The row's times, in one format: the high-water time's, to the second.

    @admin.display(description=_field_name("launched_at"))
    def launched(self, obj: WorkerNode) -> SafeString:
        return time_with_milliseconds(obj.launched_at)

    @admin.display(description=_field_name("heartbeat_at"))
    def heartbeat(self, obj: WorkerNode) -> SafeString:
        if database_alias(obj) is None:
            return time_with_milliseconds(obj.heartbeat_at)
        return format_html(
            "{} ({})",
            time_with_milliseconds(obj.heartbeat_at),
            gettext("the claim: a database function does not renew"),
        )

    @admin.display(description=_field_name("lease_expires_at"))
    def lease_expires(self, obj: WorkerNode) -> SafeString | str:
        if obj.lease_expires_at >= LEASE_END:
            return gettext("never: the slot is the database's for good")
        return time_with_milliseconds(obj.lease_expires_at)

    @admin.display(description=_field_name("released_at"))
    def released(self, obj: WorkerNode) -> SafeString | str:
        return _moment_or(obj.released_at, gettext("not released"))

    @admin.display(description=_field_name("incarnation"))
    def incarnation_in_words(self, obj: WorkerNode) -> str:
        return obj.incarnation or gettext(
            "none: this database does not tell its servers apart (SQLite), so a failover "
            "cannot be noticed"
        )

    @admin.display(description=_field_name("incarnation_since"))
    def incarnation_seen(self, obj: WorkerNode) -> SafeString | str:
        return _moment_or(obj.incarnation_since, gettext("not recorded"))

    @admin.display(description=_("high-water time"))
    def high_water(self, obj: WorkerNode) -> SafeString | str:
        """``last_timestamp`` decoded with the row's layout, and what it means: for a live
        process the end of its lease's reservation, usually ahead of the clock."""
        if obj.last_timestamp < 0:
            return gettext("none yet")
        layout = _row_layout(obj)
        try:
            moment = ms_to_datetime(layout.unit_start_ms(obj.last_timestamp))
        except OverflowError:
            return str(obj.last_timestamp)
        state = lease_state(obj, timezone.now())
        if state == "database":
            meaning = gettext(
                "The last time the database function issued IDs up to when the slot was "
                "claimed; the function keeps its own clock since."
            )
        elif state == "active":
            meaning = gettext(
                "The lease's reservation: the holder may issue IDs up to this time without "
                "asking the database again; each renewal moves it on, up to the lease ahead of "
                "the clock, and a later holder starts above it."
            )
            ahead = round((moment - timezone.now()).total_seconds())
            if ahead > 0:
                meaning += " " + gettext("Now %(ahead)s s ahead.") % {"ahead": ahead}
        else:
            meaning = gettext(
                "The highest time the slot's holders issued IDs up to, or reserved: the next "
                "holder starts above it."
            )
        return format_html("{}<br>{}", time_with_milliseconds(moment), meaning)

    @admin.display(description=_("layout"))
    def layout_in_words(self, obj: WorkerNode) -> SafeString:
        """The fingerprint decoded: bits of each field, the time unit and the epoch (in UTC,
        as the settings write it)."""
        try:
            layout = BitLayout.from_fingerprint(obj.layout)
        except ValueError:
            return format_html("<code>{}</code>", obj.layout)
        parts = [
            (_("time"), layout.time_bits),
            (_("datacenter"), layout.datacenter_bits),
            (_("clock sequence"), layout.clock_sequence_bits),
            (_("worker"), layout.worker_bits),
            (_("sequence"), layout.sequence_bits),
        ]
        bits = format_html_join(
            ", ",
            "{}",
            (
                (
                    ngettext("%(bits)d bit of %(field)s", "%(bits)d bits of %(field)s", n)
                    % {"bits": n, "field": name},
                )
                for name, n in parts
                if n
            ),
        )
        epoch = layout.epoch_datetime.astimezone(UTC)
        units = ngettext(
            "time in units of %(unit)d millisecond since %(epoch)s",
            "time in units of %(unit)d milliseconds since %(epoch)s",
            layout.time_unit_ms,
        ) % {
            "unit": layout.time_unit_ms,
            "epoch": f"{formats.date_format(epoch, 'DATE_FORMAT')} "
            f"{formats.time_format(epoch, 'H:i:s')} UTC",
        }
        return format_html("{}<br>{}<br><code>{}</code>", bits, units, obj.layout)

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
        obj = self.get_object(request, object_id)
        if (
            obj is not None
            and obj.lease_state(timezone.now()) == "active"
            and super().has_delete_permission(request, obj)
        ):
            return self.refuse_delete(request, obj)
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

    def refuse_delete(self, request: HttpRequest, obj: WorkerNode) -> HttpResponse:
        """A page (status 403) saying why an active slot cannot be deleted, linking back."""
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Cannot delete %(object)s") % {"object": obj},
            "subtitle": None,
            "object": obj,
            "opts": opts,
            "app_label": opts.app_label,
            "lease_expires_at": obj.lease_expires_at,
            "change_url": reverse(
                f"admin:{opts.app_label}_{opts.model_name}_change",
                args=[obj.pk],
                current_app=self.admin_site.name,
            ),
            "changelist_url": reverse(
                f"admin:{opts.app_label}_{opts.model_name}_changelist",
                current_app=self.admin_site.name,
            ),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            "admin/django_snowflake/workernode/delete_refused.html",
            context,
            status=403,
        )
