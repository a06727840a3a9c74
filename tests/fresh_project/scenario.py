"""What a user of the fresh project does on day one; prints the outcome of each step as JSON.

Run from the project's directory (tests/test_fresh_project.py copies it there). A step that
raises records ``"error: <exception>"`` and the next step still runs, so one report shows
every difference.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
django.setup()

from django.contrib.admin.models import LogEntry  # noqa: E402
from django.contrib.auth.models import Group, Permission, User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from shop.models import Basket, Comment, Note, Product, Shelf  # type: ignore[import-not-found]  # noqa: E402

out: dict[str, Any] = {"vendor": connection.vendor}


def step(function: Callable[[], Any]) -> None:
    try:
        out[function.__name__] = function()
    except Exception as exc:
        out[function.__name__] = f"error: {type(exc).__name__}: {exc}"


def count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
        return int(cursor.fetchone()[0])


@step
def auth() -> dict[str, Any]:
    """A user put into a group and given permissions: the rows are in the tables."""
    editors = Group.objects.create(name="editors")
    editors.permissions.add(Permission.objects.get(codename="view_product"))
    bob = User.objects.create_user("bob")
    bob.groups.add(editors)
    bob.user_permissions.add(Permission.objects.get(codename="change_product"))
    bob = User.objects.get(pk=bob.pk)  # no permission cache
    through = [User.groups.through, User.user_permissions.through, Group.permissions.through]
    return {
        "groups": list(bob.groups.values_list("name", flat=True)),
        "perms": [bob.has_perm("shop.view_product"), bob.has_perm("shop.change_product")],
        "rows": [count(model._meta.db_table) for model in through],
        # contrib.auth pins AutoField for User and Group; these rows have the project's keys.
        "keys": [pk for model in through for pk in model.objects.values_list("pk", flat=True)],
    }


@step
def admin() -> dict[str, Any]:
    """The admin adds a tagged product; its LogEntry names the Snowflake key."""
    setup_test_environment()  # the test client's host, "testserver"
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    response = client.post("/admin/shop/product/add/", {"name": "lamp", "tags": "red, blue"})
    lamp = Product.objects.get(name="lamp")
    return {
        "status": response.status_code,
        "changelist": client.get("/admin/shop/product/").status_code,
        "log": [str(lamp.pk), LogEntry.objects.get().object_id],
        "tags": sorted(lamp.tags.names()),
    }


@step
def tags() -> dict[str, Any]:
    """Tags through the 64-bit through model, read back both ways."""
    chair = Product.objects.create(name="chair")
    chair.tags.add("green", "red")
    return {
        "chair": sorted(Product.objects.get(pk=chair.pk).tags.names()),
        "green": sorted(Product.objects.filter(tags__name="green").values_list("name", flat=True)),
        "object_id": chair.tags.through.objects.filter(object_id=chair.pk).count(),
    }


@step
def taggit_own_through() -> list[str]:
    """Tags through taggit's own TaggedItem, whose object_id holds 32 bits."""
    with transaction.atomic():
        shelf = Shelf.objects.create(name="top shelf")
        shelf.tags.add("top")
    return list(Shelf.objects.get(pk=shelf.pk).tags.names())


@step
def key_only() -> list[Any]:
    """A model whose only column is its key, and its many-to-many rows."""
    basket = Basket.objects.create()
    basket.products.add(Product.objects.create(name="cup"))
    return [basket.pk > 2**53, list(basket.products.values_list("name", flat=True))]


@step
def generic_64() -> list[Any]:
    """A generic relation with a 64-bit object_id."""
    desk = Product.objects.create(name="desk")
    Note.objects.create(content_object=desk, text="sturdy")
    note = Note.objects.get()
    return [note.content_object == desk, desk.notes.count(), note.object_id == desk.pk]


@step
def generic_32() -> bool:
    """The generic relation of Django's documentation, 32 bits."""
    stool = Product.objects.create(name="stool")
    with transaction.atomic():
        comment = Comment.objects.create(content_object=stool)
    return bool(Comment.objects.get(pk=comment.pk).content_object == stool)


@step
def raw_insert() -> dict[str, Any]:
    """An INSERT that leaves the key out, as another service or a RunSQL writes it."""
    before = datetime.now(UTC).timestamp()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO shop_product (name) VALUES (%s)", ["raw"])
    after = datetime.now(UTC).timestamp()
    return {"pk": Product.objects.get(name="raw").pk, "between": [before, after]}


print(json.dumps(out))
