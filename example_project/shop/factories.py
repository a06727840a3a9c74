"""factory-boy factories for the shop's tests (factory-boy is a test dependency)."""

from __future__ import annotations

from decimal import Decimal

import factory

from .models import Customer, Order, OrderItem, Product


class CustomerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Customer

    name = factory.Sequence(lambda n: f"Customer {n}")
    email = factory.LazyAttribute(lambda c: f"{c.name.lower().replace(' ', '.')}@example.com")


class ProductFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Product

    sku = factory.Sequence(lambda n: f"SKU-{n:04d}")
    name = factory.Sequence(lambda n: f"Product {n}")
    price = Decimal("9.99")


class OrderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Order

    customer = factory.SubFactory(CustomerFactory)


class OrderItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = OrderItem

    order = factory.SubFactory(OrderFactory)
    product = factory.SubFactory(ProductFactory)
    quantity = 2
    unit_price = factory.SelfAttribute("product.price")
