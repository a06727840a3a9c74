"""Models for the test suite: SnowflakeModel, SnowflakeAutoField by default, a plain column."""

from __future__ import annotations

from django.db import models

from django_snowflake.fields import SnowflakeField
from django_snowflake.models import SnowflakeManager, SnowflakeManagerMixin, SnowflakeModel


class Named(models.Model):
    """A name, which the model is shown by."""

    name = models.CharField(max_length=100)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.name


class Customer(SnowflakeModel, Named):
    pass


class Order(SnowflakeModel):
    customer = models.ForeignKey(Customer, models.CASCADE, related_name="orders")
    total = models.DecimalField(max_digits=10, decimal_places=2, default=0)

    def __str__(self) -> str:
        return f"Order {self.pk}"


class OrderItem(SnowflakeModel):
    order = models.ForeignKey(Order, models.CASCADE, related_name="items")
    sku = models.CharField(max_length=30)
    quantity = models.PositiveIntegerField(default=1)


class TagManager(SnowflakeManagerMixin, models.Manager["Tag"]):
    """A project's own manager, given the time filters by the mixin."""


class Tag(Named):
    """Keyed by the app's default_auto_field, SnowflakeAutoField."""

    name = models.CharField(max_length=30)

    objects = TagManager()


class Event(Named):
    """Keyed by SnowflakeAutoField, with the time filters from SnowflakeManager."""

    tags = models.ManyToManyField(Tag, blank=True, related_name="events")

    objects = SnowflakeManager()


class Ticket(models.Model):
    """An ordinary key, and a Snowflake ID as a plain (editable, unique) column."""

    id = models.BigAutoField(primary_key=True)
    code = SnowflakeField(unique=True)
    external_ref = SnowflakeField(null=True, blank=True, default=None)
    event = models.ForeignKey(Event, models.CASCADE, null=True, blank=True)

    def __str__(self) -> str:
        return f"Ticket {self.code}"


class ReversedCharField(models.CharField):  # type: ignore[type-arg]
    """A custom field that stores its text reversed, through get_db_prep_save."""

    def get_db_prep_save(self, value, connection):  # type: ignore[no-untyped-def]
        value = super().get_db_prep_save(value, connection)
        return value[::-1] if isinstance(value, str) else value


class BulkTwin(SnowflakeModel):
    """Every kind of column bulk_load must store as bulk_create does (tests/test_bulk_load.py)."""

    char = models.CharField(max_length=50, blank=True)
    text = models.TextField(blank=True)
    small = models.SmallIntegerField(default=0)
    integer = models.IntegerField(default=7)
    big = models.BigIntegerField(null=True)
    positive = models.PositiveIntegerField(default=0)
    positive_big = models.PositiveBigIntegerField(default=0)
    decimal = models.DecimalField(max_digits=12, decimal_places=4, null=True)
    real = models.FloatField(null=True)
    flag = models.BooleanField(default=False)
    maybe = models.BooleanField(null=True)
    day = models.DateField(null=True)
    clock = models.TimeField(null=True)
    moment = models.DateTimeField(null=True)
    duration = models.DurationField(null=True)
    uuid = models.UUIDField(null=True)
    blob = models.BinaryField(null=True)
    data = models.JSONField(null=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    touched = models.DateField(auto_now=True)
    db_number = models.IntegerField(db_default=42)
    db_word = models.CharField(max_length=10, db_default="dbdefault")
    reversed = ReversedCharField(max_length=20, blank=True)
    customer = models.ForeignKey(Customer, models.CASCADE, null=True, related_name="+")
    partner = models.OneToOneField(Customer, models.CASCADE, null=True, related_name="+")

    class Meta:
        abstract = True


class LoadedTwin(BulkTwin):
    """Written by bulk_load."""


class CreatedTwin(BulkTwin):
    """Written by bulk_create."""


class Writer(Named):
    """Keyed by SnowflakeAutoField, with a creation hook written for AutoField."""

    greeting = models.CharField(max_length=100, blank=True)

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not self.pk:  # the AutoField idiom: runs once, before the first INSERT
            self.greeting = f"welcome {self.name}"
        super().save(*args, **kwargs)


class Place(Named):
    """Multi-table inheritance under SnowflakeAutoField: Restaurant's pk is its parent link."""


class Restaurant(Place):
    serves_pizza = models.BooleanField(default=False)


class SnowflakePlace(SnowflakeModel, Named):
    """Multi-table inheritance with the pk made at instantiation."""


class SnowflakeRestaurant(SnowflakePlace):
    serves_pizza = models.BooleanField(default=False)


class Basket(models.Model):
    """Nothing but its SnowflakeAutoField key: Django inserts it with no column given."""

    products = models.ManyToManyField(Tag, blank=True)

    def __str__(self) -> str:
        return f"basket {self.pk}"


class Member(Named):
    """Keyed by SnowflakeAutoField, with a natural key that upserts match on."""

    email = models.CharField(max_length=100, unique=True)


class Membership(models.Model):
    """A row pointing at a Member (tests/test_autofield.py's upserts)."""

    member = models.ForeignKey(Member, models.CASCADE, related_name="memberships")

    def __str__(self) -> str:
        return f"membership of {self.member_id}"
