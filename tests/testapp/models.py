"""Models for the test suite: SnowflakeModel, SnowflakeAutoField by default, a plain column."""

from __future__ import annotations

from django.db import models

from django_snowflake.fields import SnowflakeField
from django_snowflake.models import SnowflakeManager, SnowflakeManagerMixin, SnowflakeModel


class Customer(SnowflakeModel):
    name = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.name


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


class Tag(models.Model):
    """Keyed by the app's default_auto_field, SnowflakeAutoField."""

    name = models.CharField(max_length=30)

    objects = TagManager()

    def __str__(self) -> str:
        return self.name


class Event(models.Model):
    """Keyed by SnowflakeAutoField, with the time filters from SnowflakeManager."""

    name = models.CharField(max_length=100)
    tags = models.ManyToManyField(Tag, blank=True, related_name="events")

    objects = SnowflakeManager()

    def __str__(self) -> str:
        return self.name


class Ticket(models.Model):
    """An ordinary key, and a Snowflake ID as a plain (editable, unique) column."""

    id = models.BigAutoField(primary_key=True)
    code = SnowflakeField(unique=True)
    external_ref = SnowflakeField(null=True, blank=True, default=None)
    event = models.ForeignKey(Event, models.CASCADE, null=True, blank=True)

    def __str__(self) -> str:
        return f"Ticket {self.code}"
