"""SnowflakeAutoField keeps AutoField's semantics (DESIGN section 2), on every database.

Each test is an idiom written for AutoField that broke when the key existed at instantiation.
"""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core import serializers
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import path

import django_snowflake
from tests.testapp.models import (
    Customer,
    Event,
    Member,
    Membership,
    Place,
    Restaurant,
    SnowflakePlace,
    SnowflakeRestaurant,
    Tag,
    Ticket,
    Writer,
)

pytestmark = pytest.mark.django_db


def is_snowflake(value: object) -> bool:
    """A key made now under this project's layout (not a small auto-increment number)."""
    return isinstance(value, int) and django_snowflake.decode(value).timestamp.year >= 2025


def test_the_pk_is_none_until_the_first_save_and_a_snowflake_after() -> None:
    writer = Writer(name="ada")
    assert writer.pk is None
    writer.save()
    assert is_snowflake(writer.pk)
    assert Writer.objects.get().pk == writer.pk


def test_creation_hooks_written_as_if_not_self_pk_run_once() -> None:
    writer = Writer.objects.create(name="ada")
    assert writer.greeting == "welcome ada"
    writer.name = "grace"
    writer.save()
    assert Writer.objects.get().greeting == "welcome ada"


def test_save_with_the_pk_of_an_existing_row_updates_it() -> None:
    existing = Writer.objects.create(name="a")
    Writer(id=existing.id, name="b").save()
    assert list(Writer.objects.values_list("id", "name")) == [(existing.id, "b")]


def test_save_with_an_unknown_pk_inserts_that_pk() -> None:
    Writer(id=4242, name="b").save()
    assert Writer.objects.get().pk == 4242


def test_bulk_create_gives_each_object_a_key_from_its_insert() -> None:
    writers = Writer.objects.bulk_create([Writer(name=str(i)) for i in range(20)])
    keys = [writer.pk for writer in writers]
    assert all(is_snowflake(key) for key in keys) and len(set(keys)) == 20
    assert sorted(Writer.objects.values_list("pk", flat=True)) == sorted(keys)


def test_bulk_create_ignore_conflicts_leaves_keys_unset_as_autofield_does() -> None:
    # bulk_create cannot tell which rows it stored: the database makes their keys.
    existing = Writer.objects.create(name="a")
    new, clash = Writer(name="b"), Writer(id=existing.id, name="c")
    Writer.objects.bulk_create([new, clash], ignore_conflicts=True)
    assert new.pk is None
    assert clash.pk == existing.pk
    assert Writer.objects.count() == 2
    assert is_snowflake(Writer.objects.get(name="b").pk)


def test_a_key_given_as_a_string_is_the_int_the_row_holds() -> None:
    # Django 6's basic.tests test_auto_field_with_value_refreshed: an AutoField is read back.
    writer = Writer.objects.create(pk="123456", name="x")
    assert writer.pk == 123456


def test_force_update_without_a_key_is_refused_as_autofield_does() -> None:
    with pytest.raises(ValueError, match="no primary key"):
        Writer(name="x").save(force_update=True)
    with pytest.raises(ValueError, match="no primary key"):
        Writer(name="x").save(update_fields=["name"])


def test_copying_a_multi_table_child_updates_its_parents_as_autofield_does() -> None:
    # Django's documented copy idiom: the grandparent's key comes back through the parent's
    # link, and Django updates that row (its own model_inheritance test).
    restaurant = Restaurant.objects.create(name="corner")
    restaurant.pk = None
    restaurant.id = None
    restaurant._state.adding = True
    restaurant.save()
    assert Restaurant.objects.count() == 2


def test_a_key_of_0_is_refused_where_autofield_refuses_it() -> None:
    if connection.features.allows_auto_pk_0:
        pytest.skip("0 is a key there")
    # MySQL and MariaDB read 0 as "generate" (the trigger did so): Django's ValueError, as
    # with AutoField (its own bulk_create test_zero_as_autoval).
    with pytest.raises(ValueError, match="does not accept 0"):
        Writer.objects.bulk_create([Writer(id=0, name="zero")])


def test_bulk_create_update_conflicts_gives_each_object_the_key_of_its_row() -> None:
    # Django reads the keys back from the upsert (RETURNING), as it does for AutoField:
    # the object that hit an existing row gets that row's key, a new one its new row's.
    existing = Member.objects.create(name="old", email="a@example.com")
    hit, new = Member(name="new", email="a@example.com"), Member(name="b", email="b@example.com")
    Member.objects.bulk_create(
        [hit, new],
        update_conflicts=True,
        # MariaDB's upsert (ON DUPLICATE KEY UPDATE) takes no conflict target.
        unique_fields=(
            ["email"] if connection.features.supports_update_conflicts_with_target else None
        ),
        update_fields=["name"],
    )
    rows = dict(Member.objects.values_list("email", "pk"))
    assert hit.pk == existing.pk == rows["a@example.com"]
    assert new.pk == rows["b@example.com"] and is_snowflake(new.pk)
    Membership.objects.create(member=hit)
    Membership.objects.create(member=new)
    assert sorted(Membership.objects.values_list("member__name", flat=True)) == ["b", "new"]


def test_saving_with_an_unsaved_related_object_is_refused() -> None:
    with pytest.raises(ValueError, match="unsaved related object"):
        Ticket(code=1, event=Event(name="unsaved")).save()
    with pytest.raises(ValueError, match="must be saved"):
        Ticket.objects.filter(event=Event(name="unsaved")).exists()
    with pytest.raises(ValueError, match="set to None"):
        Event(name="unsaved").delete()


def test_multi_table_inheritance_parent_links() -> None:
    place = Place.objects.create(name="corner")
    # The parent link of an existing place: no second Place row.
    Restaurant.objects.create(place_ptr=place, name="corner")
    Restaurant(place_ptr_id=Place.objects.create(name="square").pk, name="square").save()
    assert Place.objects.count() == 2
    assert Restaurant.objects.count() == 2
    # An explicit pk is used for both tables; a new restaurant gets a new key.
    assert Restaurant.objects.create(pk=4242, name="x").place_ptr_id == 4242
    fresh = Restaurant.objects.create(name="new")
    assert is_snowflake(fresh.pk) and Place.objects.get(pk=fresh.pk).name == "new"


def test_serializers_of_unsaved_objects_emit_no_pk() -> None:
    (data,) = json.loads(serializers.serialize("json", [Writer(name="ada")]))
    assert data["pk"] is None


def test_full_clean_of_a_new_instance_runs_no_query() -> None:
    with CaptureQueriesContext(connection) as queries:
        Writer(name="ada").full_clean()
    assert queries.captured_queries == []


class TagAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    readonly_fields = ["events"]  # a reverse many-to-many, shown read-only


site = admin.AdminSite(name="autofield_admin")
site.register(Tag, TagAdmin)
urlpatterns = [path("admin/", site.urls)]


@override_settings(ROOT_URLCONF=__name__)
def test_admin_add_page_with_a_readonly_reverse_many_to_many(client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    assert client.get("/admin/testapp/tag/add/").status_code == 200


def test_an_insert_that_leaves_the_key_out_gets_a_snowflake() -> None:
    table = connection.ops.quote_name(Writer._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (name, greeting) VALUES ('raw', '')")
        cursor.execute(f"INSERT INTO {table} (name, greeting) SELECT 'copy', greeting FROM {table}")
    keys = list(Writer.objects.values_list("pk", flat=True))
    assert len(set(keys)) == 2 and all(is_snowflake(key) for key in keys)


# SnowflakeField(primary_key=True) / SnowflakeModel: the key exists at instantiation, by design.


def test_full_clean_of_a_new_snowflake_model_does_not_query_its_own_fresh_key() -> None:
    with CaptureQueriesContext(connection) as queries:
        Customer(name="ada").full_clean()
    assert queries.captured_queries == []
    # A key this process did not issue is still checked.
    Customer.objects.create(pk=4242, name="ada")
    with pytest.raises(ValidationError, match="already exists"):
        Customer(pk=4242, name="copy").full_clean()


def test_snowflake_model_multi_table_parent_links() -> None:
    place = SnowflakePlace.objects.create(name="corner")
    SnowflakeRestaurant.objects.create(snowflakeplace_ptr=place, name="corner")
    square = SnowflakePlace.objects.create(name="square")
    SnowflakeRestaurant(snowflakeplace_ptr_id=square.pk, name="square").save()
    assert SnowflakePlace.objects.count() == 2
    assert sorted(SnowflakeRestaurant.objects.values_list("pk", flat=True)) == sorted(
        [place.pk, square.pk]
    )
    assert SnowflakeRestaurant.objects.create(pk=4242, name="x").snowflakeplace_ptr_id == 4242
    assert SnowflakePlace.objects.get(pk=4242).name == "x"
    fresh = SnowflakeRestaurant(name="new")
    # The child's pk is its parent link (None until saved, as in Django); the parent's key
    # exists at instantiation and becomes the child's.
    assert fresh.pk is None and is_snowflake(fresh.id)
    key = fresh.id
    fresh.save()
    assert fresh.pk == fresh.snowflakeplace_ptr_id == key
    assert SnowflakePlace.objects.get(pk=key).name == "new"
