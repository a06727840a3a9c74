"""A small shop. Customers and products are keyed by DEFAULT_AUTO_FIELD (SnowflakeAutoField);
orders and their items by SnowflakeModel, which adds ``created_at`` and the time filters."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from django_snowflake.models import SnowflakeManager, SnowflakeModel


class Customer(models.Model):
    name = models.CharField(max_length=100)
    email = models.EmailField(unique=True)

    objects = SnowflakeManager()

    def __str__(self) -> str:
        return self.name


class Product(models.Model):
    sku = models.CharField("SKU", max_length=20, unique=True)
    name = models.CharField(max_length=100)
    price = models.DecimalField(max_digits=8, decimal_places=2)

    def __str__(self) -> str:
        return self.name


class Order(SnowflakeModel):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        PAID = "paid", "Paid"
        SHIPPED = "shipped", "Shipped"

    customer = models.ForeignKey(Customer, models.PROTECT, related_name="orders")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)

    def __str__(self) -> str:
        return f"Order {self.pk}"

    @property
    def total(self) -> Decimal:
        return sum((item.subtotal for item in self.items.all()), Decimal("0.00"))


class OrderItem(SnowflakeModel):
    order = models.ForeignKey(Order, models.CASCADE, related_name="items")
    product = models.ForeignKey(Product, models.PROTECT, related_name="+")
    quantity = models.PositiveIntegerField(default=1)
    unit_price = models.DecimalField(max_digits=8, decimal_places=2)

    def __str__(self) -> str:
        return f"{self.quantity} x {self.product}"

    @property
    def subtotal(self) -> Decimal:
        return self.quantity * self.unit_price
