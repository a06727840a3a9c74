"""``manage.py seed_demo``: demo products, customers and orders, and an admin user.

Safe to run again: it adds data only to an empty shop, and resets the demo user's password so
that the credentials it prints always work.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from django_snowflake import get_generator
from shop.models import Customer, Order, OrderItem, Product

USERNAME = "admin"
PASSWORD = "snowflake"

PRODUCTS = [
    ("MUG-01", "Snowflake mug", "12.50"),
    ("TEE-01", "Snowflake T-shirt", "24.00"),
    ("CAP-01", "Winter cap", "18.90"),
    ("SCF-01", "Wool scarf", "35.00"),
    ("STK-01", "Sticker pack", "4.20"),
]
CUSTOMERS = ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov"]
ORDERS = 12


class Command(BaseCommand):
    help = "Create demo data and a demo admin user (admin / snowflake); safe to run again."

    def handle(self, *args: Any, **options: Any) -> None:
        # Claim the worker slot before the transaction: the claim is written on a connection
        # of its own, and SQLite lets only one connection write at a time.
        get_generator().ensure_lease()
        with transaction.atomic():
            if Order.objects.exists():
                self.stdout.write("Demo data is already there; nothing added.")
            else:
                self.create_orders()
        user, created = get_user_model().objects.get_or_create(
            username=USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        user.set_password(PASSWORD)
        user.save()
        self.stdout.write(
            self.style.SUCCESS(
                f"Admin user {'created' if created else 'ready'}: "
                f"username {USERNAME!r}, password {PASSWORD!r}"
            )
        )

    def create_orders(self) -> None:
        rng = random.Random(7)
        products = [
            Product.objects.create(sku=sku, name=name, price=Decimal(price))
            for sku, name, price in PRODUCTS
        ]
        customers = [
            Customer.objects.create(name=name, email=f"{name.split()[0].lower()}@example.com")
            for name in CUSTOMERS
        ]
        # Orders are created one after another; each key carries its creation time.
        for _ in range(ORDERS):
            order = Order.objects.create(
                customer=rng.choice(customers), status=rng.choice(Order.Status.values)
            )
            OrderItem.objects.bulk_create(
                OrderItem(
                    order=order,
                    product=product,
                    quantity=rng.randint(1, 3),
                    unit_price=product.price,
                )
                for product in rng.sample(products, rng.randint(1, 3))
            )
        self.stdout.write(
            f"Created {len(products)} products, {len(customers)} customers and {ORDERS} orders."
        )
