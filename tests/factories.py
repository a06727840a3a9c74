"""factory-boy factories for the test models."""

from __future__ import annotations

import factory
from django.db import models
from factory.django import DjangoModelFactory

from tests.testapp.models import Customer, Event, Order, OrderItem, Tag, Ticket


def named_factory(model: type[models.Model], prefix: str) -> type[DjangoModelFactory]:
    """A factory for ``model``, whose one required field is a ``name``: ``prefix`` and a number."""
    return factory.make_factory(
        model, FACTORY_CLASS=DjangoModelFactory, name=factory.Sequence(lambda n: f"{prefix}{n}")
    )


CustomerFactory = named_factory(Customer, "Customer ")
TagFactory = named_factory(Tag, "tag")
EventFactory = named_factory(Event, "Event ")


class OrderFactory(DjangoModelFactory):
    class Meta:
        model = Order

    customer = factory.SubFactory(CustomerFactory)
    total = factory.Sequence(lambda n: n + 10)


class OrderItemFactory(DjangoModelFactory):
    class Meta:
        model = OrderItem

    order = factory.SubFactory(OrderFactory)
    sku = factory.Sequence(lambda n: f"SKU-{n:04d}")


class TicketFactory(DjangoModelFactory):
    class Meta:
        model = Ticket
