from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse
from django.utils import formats, timezone, translation
from django.utils.html import escape

from django_snowflake import decode, generate, get_generator
from django_snowflake.conf import get_settings
from django_snowflake.database_slots import DATABASE_HOST, LEASE_END
from django_snowflake.models import WorkerNode
from django_snowflake.runtime import reset
from tests.factories import CustomerFactory, OrderFactory
from tests.testapp.models import Order

pytestmark = pytest.mark.django_db

# UTC+14: the local day differs from the UTC day for much of every day.
LOCAL_ZONE = "Pacific/Kiritimati"


def order_at(dt: datetime) -> Order:
    """An order whose key carries time ``dt``, under a worker ID the tests never hold."""
    layout = get_generator().layout
    units = layout.to_units(int(dt.timestamp() * 1000))
    return OrderFactory(id=layout.compose(units, worker_id=layout.max_worker_id))


def shown(dt: datetime) -> str:
    """How the admin shows a decoded time: local time zone, the locale's date, the time to the
    second, the exact time on hover."""
    local = timezone.localtime(dt)
    exact = local.isoformat(timespec="milliseconds")
    return f'<span class="nowrap" title="{exact}">{formats.date_format(local, "DATE_FORMAT")} {local:%H:%M:%S}</span>'


@override_settings(TIME_ZONE=LOCAL_ZONE)
def test_created_column_shows_seconds_and_the_millisecond_on_hover(admin_client: Client) -> None:
    order = order_at(datetime(2026, 3, 1, 12, 3, 5, 123_000, tzinfo=UTC))
    response = admin_client.get(reverse("admin:testapp_order_changelist"))
    assert (
        '<td class="field-snowflake_created">'
        '<span class="nowrap" title="2026-03-02T02:03:05.123+14:00">March 2, 2026 02:03:05</span></td>'
    ) in response.text
    change = admin_client.get(reverse("admin:testapp_order_change", args=[order.pk]))
    assert (
        '<span class="nowrap" title="2026-03-02T02:03:05.123+14:00">March 2, 2026 02:03:05</span>'
        in change.text
    )


@override_settings(TIME_ZONE=LOCAL_ZONE)
def test_changelist_has_a_created_column_newest_first(admin_client: Client) -> None:
    orders = [OrderFactory() for _ in range(3)]
    response = admin_client.get(reverse("admin:testapp_order_changelist"))
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == orders[::-1]
    assert "column-snowflake_created" in response.text
    assert shown(orders[0].created_at) in response.text
    # The column sorts by the primary key.
    response = admin_client.get(reverse("admin:testapp_order_changelist") + "?o=4")
    assert list(response.context["cl"].result_list) == orders


def test_the_admins_own_ordering_wins(admin_client: Client) -> None:
    customers = [CustomerFactory(name=name) for name in ["b", "c", "a"]]
    response = admin_client.get(reverse("admin:testapp_customer_changelist"))
    assert list(response.context["cl"].result_list) == sorted(customers, key=lambda c: c.name)


@override_settings(TIME_ZONE=LOCAL_ZONE)
def test_change_page_breaks_the_id_down(admin_client: Client) -> None:
    order = OrderFactory()
    parts = decode(order.pk)
    response = admin_client.get(reverse("admin:testapp_order_change", args=[order.pk]))
    assert response.status_code == 200
    fieldsets = [fieldset.name for fieldset in response.context["adminform"]]
    assert fieldsets == [None, "Snowflake ID"]
    (breakdown,) = [f for f in response.context["adminform"] if f.name == "Snowflake ID"]
    rows = {
        str(field.field["label"]): str(field.contents()) for line in breakdown for field in line
    }
    assert rows == {
        "created": shown(parts.timestamp),
        "ID": str(parts.id),
        "worker": str(parts.worker_id),
        "datacenter": "0",
        "sequence": str(parts.sequence),
        "clock sequence": "0",
    }


def test_declared_fieldsets_get_the_breakdown_too_and_adding_still_works(
    admin_client: Client,
) -> None:
    customer = CustomerFactory()
    change = admin_client.get(reverse("admin:testapp_customer_change", args=[customer.pk]))
    assert [fieldset.name for fieldset in change.context["adminform"]] == [None, "Snowflake ID"]
    add_url = reverse("admin:testapp_customer_add")
    add = admin_client.get(add_url)
    assert [fieldset.name for fieldset in add.context["adminform"]] == [None]
    response = admin_client.post(add_url, {"name": "New customer"})
    assert response.status_code == 302
    assert CustomerFactory._meta.model.objects.filter(name="New customer").exists()


@override_settings(TIME_ZONE=LOCAL_ZONE)
def test_created_filter_uses_local_days(admin_client: Client) -> None:
    now = timezone.localtime()
    moments = [
        now,
        now.replace(hour=0, minute=0, second=0, microsecond=0),  # local midnight
        now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(milliseconds=1),
        now - timedelta(days=3),
        now - timedelta(days=8),
        now - timedelta(days=40),
        now - timedelta(days=400),
    ]
    orders = {moment: order_at(moment) for moment in moments}
    today = moments[1]
    starts = {
        "today": today,
        "past_7_days": today - timedelta(days=7),
        "this_month": today.replace(day=1),
        "this_year": today.replace(month=1, day=1),
    }
    url = reverse("admin:testapp_order_changelist")
    for choice, start in starts.items():
        response = admin_client.get(url, {"created": choice})
        expected = {order for moment, order in orders.items() if moment >= start}
        assert set(response.context["cl"].result_list) == expected, choice
    response = admin_client.get(url, {"created": "today"})
    assert shown(orders[now].created_at) in response.text


def test_created_filter_ignores_unknown_choices(admin_client: Client) -> None:
    order = OrderFactory()
    response = admin_client.get(reverse("admin:testapp_order_changelist"), {"created": "x"})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [order]


def worker_node(worker_id: int, *, expires_in: timedelta, released: bool = False) -> WorkerNode:
    now = timezone.now()
    return WorkerNode.objects.create(
        worker_id=worker_id,
        host_name="web-1",
        process_id=4242,
        label="web",
        launched_at=now - timedelta(hours=1),
        heartbeat_at=now - timedelta(seconds=12),
        lease_expires_at=now + expires_in,
        released_at=now if released else None,
        last_timestamp=0,
        layout=get_generator().layout.fingerprint,
        token="t",
    )


def ours(rows: Iterable[WorkerNode]) -> list[WorkerNode]:
    """The tests' rows: on PostgreSQL and MariaDB the database's own key function holds a
    slot too (host ``(database)``, the highest worker ID)."""
    return [node for node in rows if 900 <= node.worker_id < 1000]


@pytest.fixture
def nodes() -> dict[str, WorkerNode]:
    return {
        "active": worker_node(901, expires_in=timedelta(seconds=40)),
        "expired": worker_node(902, expires_in=timedelta(seconds=-5)),
        "released": worker_node(903, expires_in=timedelta(seconds=40), released=True),
    }


def database_node(label: str) -> WorkerNode:
    """A database function's slot, as the database's claim writes it (database_slots)."""
    now = timezone.now()
    return WorkerNode.objects.create(
        worker_id=999,
        host_name=DATABASE_HOST,
        process_id=0,
        label=label,
        launched_at=now - timedelta(days=3),
        heartbeat_at=now - timedelta(days=3),
        lease_expires_at=LEASE_END,
        last_timestamp=0,
        layout=get_generator().layout.fingerprint,
        token="database-test",
    )


LEASE_CELLS = {
    "active": "Active",
    "expired": "Expired: free for the next claim",
    "released": "Released: free for the next claim",
}


def test_worker_nodes_are_listed_with_their_lease_state(
    admin_client: Client, nodes: dict[str, WorkerNode]
) -> None:
    url = reverse("admin:django_snowflake_workernode_changelist")
    response = admin_client.get(url)
    assert response.status_code == 200
    assert "12 seconds ago" in response.text
    assert reverse("admin:django_snowflake_workernode_add") not in response.text
    for state, node in nodes.items():
        filtered = admin_client.get(url, {"lease": state})
        assert ours(filtered.context["cl"].result_list) == [node]
        assert f'<td class="field-lease">{LEASE_CELLS[state]}</td>' in filtered.text


@pytest.mark.django_db(transaction=True)
def test_a_released_row_says_what_the_next_claim_will_do_not_what_one_did(
    admin_client: Client, database_generator: Any
) -> None:
    # A process claims a slot and exits cleanly: nothing has claimed the row since, so its
    # label may not say it was reused (before: "Released: reused by a later claim").
    generator = database_generator()
    generate()
    assert generator.lease is not None
    worker_id = generator.lease.worker_id
    reset()
    url = reverse("admin:django_snowflake_workernode_changelist")
    released = admin_client.get(url, {"lease": "released"})
    assert [row.worker_id for row in released.context["cl"].result_list] == [worker_id]
    assert '<td class="field-lease">Released: free for the next claim</td>' in released.text
    assert "reused" not in released.text
    # The next claim (this host's last slot first) takes the row: then it is active, and no
    # row reads as released.
    again = get_generator()
    generate()
    assert again.lease is not None and again.lease.worker_id == worker_id
    assert list(admin_client.get(url, {"lease": "released"}).context["cl"].result_list) == []
    active = admin_client.get(url, {"lease": "active"})
    assert [row.worker_id for row in active.context["cl"].result_list] == [worker_id]
    assert '<td class="field-lease">Active</td>' in active.text


def test_live_slots_come_first_then_the_rows_a_claim_reuses(admin_client: Client) -> None:
    # Created in the opposite order, and worker IDs that would sort them the other way.
    released = worker_node(904, expires_in=timedelta(seconds=40), released=True)
    expired = worker_node(903, expires_in=timedelta(seconds=-5))
    database = database_node("database:default")
    active = worker_node(905, expires_in=timedelta(seconds=40))
    older = worker_node(901, expires_in=timedelta(seconds=-50))
    response = admin_client.get(reverse("admin:django_snowflake_workernode_changelist"))
    assert ours(response.context["cl"].result_list) == [active, database, older, expired, released]
    # No sort-priority numbers: one column takes part in the order.
    assert 'class="sortpriority"' not in response.text


@pytest.mark.parametrize(
    ("label", "reserved"),
    [
        ("database:default", "reserved for the database function of database 'default'"),
        ("database:shard_2", "reserved for the database function of database 'shard_2'"),
        # Rows the database's claim wrote before labels named the alias.
        ("database", "reserved for a database function"),
    ],
)
def test_a_database_slot_reads_as_reserved_not_as_a_stuck_process(
    admin_client: Client, label: str, reserved: str
) -> None:
    node = database_node(label)
    url = reverse("admin:django_snowflake_workernode_changelist")
    listed = admin_client.get(url)
    assert f'<td class="field-lease">{escape(reserved)}, no heartbeat</td>' in listed.text
    assert (
        '<td class="field-heartbeat_age">none: a database function does not renew</td>'
        in listed.text
    )
    assert "days ago" not in listed.text
    assert ours(admin_client.get(url, {"lease": "active"}).context["cl"].result_list) == []
    database = admin_client.get(url, {"lease": "database"}).context["cl"].result_list
    assert node in database
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    assert f"<h2>worker 999/0, {escape(reserved)}, no heartbeat</h2>" in page.text
    assert "never: the slot is the database&#x27;s for good" in page.text
    assert "the claim: a database function does not renew" in page.text


def test_worker_list_sorts_by_one_key_and_drops_an_all_zero_datacenter_column(
    admin_client: Client, nodes: dict[str, WorkerNode]
) -> None:
    response = admin_client.get(reverse("admin:django_snowflake_workernode_changelist"))
    # No sort-priority numbers: they appear only when two columns take part in the order.
    assert 'class="sortpriority"' not in response.text
    assert "column-datacenter_id" not in response.text
    assert [n.worker_id for n in ours(response.context["cl"].result_list)] == [901, 902, 903]


@override_settings(
    SNOWFLAKE={"WORKER_ALLOCATOR": "static", "WORKER_ID": 0, "DATACENTER_BITS": 2, "WORKER_BITS": 8}
)
def test_the_datacenter_column_is_there_when_the_layout_has_datacenters(
    admin_client: Client, nodes: dict[str, WorkerNode]
) -> None:
    response = admin_client.get(reverse("admin:django_snowflake_workernode_changelist"))
    assert "column-datacenter_id" in response.text


@override_settings(TIME_ZONE=LOCAL_ZONE)
def test_worker_page_decodes_the_high_water_mark_and_the_layout(
    admin_client: Client, nodes: dict[str, WorkerNode]
) -> None:
    node = nodes["expired"]
    layout = get_generator().layout
    node.last_timestamp = layout.to_units(
        int(datetime(2026, 3, 1, 12, tzinfo=UTC).timestamp() * 1000)
    )
    node.save()
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    assert page.status_code == 200
    assert (
        '<span class="nowrap" title="2026-03-02T02:00:00.000+14:00">March 2, 2026 02:00:00</span>'
        in page.text
    )
    assert "the next holder starts above it" in page.text
    assert str(node.last_timestamp) not in page.text
    assert "41 bits of time, 10 bits of worker, 12 bits of sequence" in page.text
    # The epoch as the settings write it, in UTC, not in the current time zone (it read
    # "since Jan. 1, 2025, 2 p.m." in UTC+14).
    assert "time in units of 1 millisecond since Jan. 1, 2025 00:00:00 UTC" in page.text
    fieldsets = [str(fieldset.name) for fieldset in page.context["adminform"]]
    assert fieldsets == ["Slot", "Lease", "Time and layout"]


def page_rows(page: Any) -> dict[str, str]:
    return {
        str(field.field["label"]): str(field.contents())
        for fieldset in page.context["adminform"]
        for line in fieldset
        for field in line
    }


@override_settings(TIME_ZONE=LOCAL_ZONE)
def test_worker_page_shows_every_time_in_one_format(
    admin_client: Client, nodes: dict[str, WorkerNode]
) -> None:
    node = nodes["released"]
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    rows = page_rows(page)
    for label, value in [
        ("launched at", node.launched_at),
        ("heartbeat at", node.heartbeat_at),
        ("lease expires at", node.lease_expires_at),
        ("released at", node.released_at),
    ]:
        assert rows[label] == shown(value), label
    assert "a.m." not in page.text and "p.m." not in page.text


def test_an_active_slots_high_water_time_is_its_reservation(admin_client: Client) -> None:
    node = worker_node(906, expires_in=timedelta(seconds=60))
    layout = get_generator().layout
    node.last_timestamp = layout.to_units(int(timezone.now().timestamp() * 1000) + 45_000)
    node.save()
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    high_water = page_rows(page)["high-water time"]
    assert "The lease&#x27;s reservation" in high_water
    assert re.search(r"Now 4[45] s ahead\.", high_water)


@pytest.mark.parametrize(
    ("incarnation", "since", "expected"),
    [
        # SQLite: nothing to tell servers apart, so no "first seen" beside it.
        ("", True, {"database incarnation": "none: this database does not tell"}),
        (
            "7712193528313505905/1",
            True,
            {"database incarnation": "7712193528313505905/1", "incarnation first seen": "<span"},
        ),
        (
            "7712193528313505905/1",
            False,
            {"database incarnation": "7712193528313505905/1", "incarnation first seen": "not"},
        ),
    ],
)
def test_the_incarnation_is_shown_only_where_there_is_one(
    admin_client: Client, incarnation: str, since: bool, expected: dict[str, str]
) -> None:
    node = worker_node(907, expires_in=timedelta(seconds=60))
    WorkerNode.objects.filter(pk=node.pk).update(
        incarnation=incarnation, incarnation_since=timezone.now() if since else None
    )
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    rows = {
        label: value
        for label, value in page_rows(page).items()
        if label in ("database incarnation", "incarnation first seen")
    }
    assert rows.keys() == expected.keys()
    for label, start in expected.items():
        assert rows[label].startswith(start), label


@override_settings(LANGUAGE_CODE="de")
def test_the_worker_pages_title_is_translated(admin_client: Client) -> None:
    node = worker_node(908, expires_in=timedelta(seconds=60))
    with translation.override("de"):
        page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    assert "<h2>Worker 908/0 auf web-1:4242</h2>" in page.text


def test_worker_nodes_are_view_only(admin_client: Client, nodes: dict[str, WorkerNode]) -> None:
    node = nodes["active"]
    assert admin_client.get(reverse("admin:django_snowflake_workernode_add")).status_code == 403
    url = reverse("admin:django_snowflake_workernode_change", args=[node.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    assert 'name="_save"' not in page.text
    assert admin_client.post(url, {"label": "changed"}).status_code == 403
    node.refresh_from_db()
    assert node.label == "web"


def test_only_expired_or_released_slots_may_be_deleted(
    admin_client: Client, nodes: dict[str, WorkerNode]
) -> None:
    active = reverse("admin:django_snowflake_workernode_delete", args=[nodes["active"].pk])
    for refused in [admin_client.get(active), admin_client.post(active, {"post": "yes"})]:
        # Not a bare "403 Forbidden": the page says why and links back.
        assert refused.status_code == 403
        assert "This worker slot is active" in refused.text
        change = reverse("admin:django_snowflake_workernode_change", args=[nodes["active"].pk])
        assert f'href="{change}"' in refused.text
    for state in ["expired", "released"]:
        url = reverse("admin:django_snowflake_workernode_delete", args=[nodes[state].pk])
        confirmation = admin_client.get(url)
        assert confirmation.status_code == 200
        assert "breaks the guarantee that every ID is unique" in confirmation.text
        assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert ours(WorkerNode.objects.all()) == [nodes["active"]]


@pytest.fixture
def orders() -> list[Order]:
    return [OrderFactory(customer=CustomerFactory(name=name)) for name in ["Ada", "Grace", "Linus"]]


@pytest.mark.parametrize(
    ("search", "found"),
    [
        ("{0}", [0]),
        ("  {2}  ", [2]),
        ("{0} {2}", [0, 2]),
        ("{0},{1}, {2}", [0, 1, 2]),
        # A malformed or impossible ID finds nothing, never a 500.
        ("{0}x", []),
        ("-{0}", []),
        ("{0} Ada", []),
        ("99999999999999999999", []),
        ("٣", []),
        ("12", []),
        ("", [0, 1, 2]),
    ],
)
def test_the_search_box_finds_orders_by_id(
    admin_client: Client, orders: list[Order], search: str, found: list[int]
) -> None:
    # OrderAdmin has no search_fields: the mixin gives it the box, for IDs.
    url = reverse("admin:testapp_order_changelist")
    response = admin_client.get(url, {"q": search.format(*(order.pk for order in orders))})
    assert response.status_code == 200
    assert 'id="searchbar"' in response.text
    assert set(response.context["cl"].result_list) == {orders[i] for i in found}


@pytest.mark.parametrize(
    ("search", "found"),
    [
        ("Ada", ["Ada"]),
        ("a", ["Ada", "Grace"]),
        ("{Linus}", ["Linus"]),
        ("{Ada} {Linus}", ["Ada", "Linus"]),
        ("{Ada}x", []),
    ],
)
def test_the_search_by_id_keeps_the_admins_own_search_fields(
    admin_client: Client, orders: list[Order], search: str, found: list[str]
) -> None:
    customers = {order.customer.name: order.customer.pk for order in orders}
    url = reverse("admin:testapp_customer_changelist")
    response = admin_client.get(url, {"q": search.format(**customers)})
    assert response.status_code == 200
    assert sorted(c.name for c in response.context["cl"].result_list) == found


@pytest.mark.parametrize("label", ["database:default", "database:not_here"])
def test_a_database_slots_page_shows_its_function(admin_client: Client, label: str) -> None:
    """Where the function of the slot's database lives, its slot and how far its clock is
    behind, as show_worker says it; nothing of the kind on a process's slot."""
    node = database_node(label)
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[node.pk]))
    assert "database function" in page.text
    if label == "database:not_here" or connection.vendor == "sqlite":
        alias = escape(repr(label.partition(":")[2]))
        assert f"not readable here: {alias} is no PostgreSQL or MariaDB database" in page.text
    elif connection.vendor == "postgresql":
        assert re.search(
            r"in schema public, slot \d+/0, -?\d+ ms behind the server&#x27;s", page.text
        )
    elif get_settings()["MARIADB_KEYS"] == "trigger":
        assert "clock n/a" in page.text
    else:  # MariaDB's default path: its key sequence's lag
        assert re.search(r"slot \d+/0, -?\d+ ms behind the server&#x27;s", page.text)
    process = worker_node(905, expires_in=timedelta(seconds=40))
    page = admin_client.get(reverse("admin:django_snowflake_workernode_change", args=[process.pk]))
    assert "database function" not in page.text
