"""factory-boy factories for the test models."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.db import models
from django.utils import timezone
from factory.django import DjangoModelFactory

from django_snowflake.conf import get_layout
from django_snowflake.models import WorkerNode
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


class ExpiredSlotFactory(DjangoModelFactory):
    """A ``WorkerNode`` row of another host whose lease ended an hour ago."""

    class Meta:
        model = WorkerNode

    worker_id = factory.Sequence(lambda n: n)
    host_name = "elsewhere"
    process_id = 1
    launched_at = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=1))
    heartbeat_at = factory.SelfAttribute("launched_at")
    lease_expires_at = factory.SelfAttribute("launched_at")
    last_timestamp = 0
    layout = factory.LazyFunction(lambda: get_layout().fingerprint)
    token = factory.LazyAttribute(lambda node: f"old{node.worker_id}")
