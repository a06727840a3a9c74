"""A small shop. Customers and products are keyed by DEFAULT_AUTO_FIELD (SnowflakeAutoField);
orders and their items by SnowflakeModel, which adds ``created_at`` and the time filters."""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from django_snowflake.models import SnowflakeManager, SnowflakeModel


class Customer(models.Model):
    name = models.CharField(_("name"), max_length=100)
    email = models.EmailField(_("email"), unique=True)

    objects = SnowflakeManager()

    class Meta:
        verbose_name = _("customer")
        verbose_name_plural = _("customers")

    def __str__(self) -> str:
        return self.name


class Product(models.Model):
    sku = models.CharField(_("SKU"), max_length=20, unique=True)
    name = models.CharField(_("name"), max_length=100)
    price = models.DecimalField(_("price"), max_digits=8, decimal_places=2)

    class Meta:
        verbose_name = _("product")
        verbose_name_plural = _("products")

    def __str__(self) -> str:
        return self.name


class Order(SnowflakeModel):
    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        PAID = "paid", _("Paid")
        SHIPPED = "shipped", _("Shipped")

    customer = models.ForeignKey(
        Customer, models.PROTECT, related_name="orders", verbose_name=_("customer")
    )
    status = models.CharField(
        _("status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )

    class Meta:
        verbose_name = _("order")
        verbose_name_plural = _("orders")

    def __str__(self) -> str:
        return gettext("Order %(id)s") % {"id": self.pk}

    @property
    def total(self) -> Decimal:
        return sum((item.subtotal for item in self.items.all()), Decimal("0.00"))


class OrderItem(SnowflakeModel):
    order = models.ForeignKey(Order, models.CASCADE, related_name="items", verbose_name=_("order"))
    product = models.ForeignKey(
        Product, models.PROTECT, related_name="+", verbose_name=_("product")
    )
    quantity = models.PositiveIntegerField(_("quantity"), default=1)
    unit_price = models.DecimalField(_("unit price"), max_digits=8, decimal_places=2)

    class Meta:
        verbose_name = _("order item")
        verbose_name_plural = _("order items")

    def __str__(self) -> str:
        return f"{self.quantity} x {self.product}"

    @property
    def subtotal(self) -> Decimal:
        return self.quantity * self.unit_price
