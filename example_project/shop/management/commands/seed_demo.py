"""``manage.py seed_demo``: demo products, customers and orders, and an admin user.

Safe to run again: it adds data only to an empty shop, and resets the demo user's password so
that the credentials it prints always work. ``--orders N`` adds N more orders with their
lines through ``bulk_load`` (parents, then children, in one transaction), with a progress bar.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

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
#: How long ago each demo order was placed: today, this week, this month, this year and before,
#: so the created column and the created filter have something to tell apart.
ORDER_AGES = [
    timedelta(minutes=4),
    timedelta(minutes=50),
    timedelta(hours=5),
    timedelta(days=1, hours=3),
    timedelta(days=2, hours=7),
    timedelta(days=4),
    timedelta(days=6, hours=20),
    timedelta(days=11),
    timedelta(days=23),
    timedelta(days=47),
    timedelta(days=130),
    timedelta(days=420),
]
#: Orders built and loaded at a time by --orders: memory stays flat however many are asked.
CHUNK = 10_000


class Command(BaseCommand):
    help = "Create demo data and a demo admin user (admin / snowflake); safe to run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--orders",
            type=int,
            default=0,
            metavar="N",
            help="also load N random orders and their lines with bulk_load (e.g. 1000000)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["orders"] < 0:
            raise CommandError(f"--orders takes a number of orders, not {options['orders']}.")
        # Claim the worker slot before the transaction: the claim is written on a connection
        # of its own, and SQLite lets only one connection write at a time.
        get_generator().ensure_lease()
        with transaction.atomic():
            if Order.objects.exists():
                self.stdout.write("Demo data is already there; nothing added.")
            else:
                self.create_orders()
        if options["orders"]:
            self.load_orders(options["orders"])
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
        # Each key carries its order's creation time; the demo's are backdated (backdated_key).
        now = timezone.now()
        for sequence, age in enumerate(ORDER_AGES):
            order = Order.objects.create(
                id=backdated_key(now - age, sequence),
                customer=rng.choice(customers),
                status=rng.choice(Order.Status.values),
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
            f"Created {len(products)} products, {len(customers)} customers and "
            f"{len(ORDER_AGES)} orders placed over the past {ORDER_AGES[-1].days} days."
        )

    def load_orders(self, count: int) -> None:
        """Load ``count`` orders and their lines: each chunk's orders, then its lines, all in
        one transaction, so the lines' foreign keys always find their orders."""
        products = list(Product.objects.all())
        customers = list(Customer.objects.values_list("pk", flat=True))
        if not products or not customers:
            raise CommandError("--orders needs the demo products and customers; none found.")
        rng = random.Random(count)
        started = time.perf_counter()
        lines = 0
        with transaction.atomic():
            for offset in range(0, count, CHUNK):
                orders = [
                    Order(customer_id=rng.choice(customers), status=rng.choice(Order.Status.values))
                    for _ in range(min(CHUNK, count - offset))
                ]
                Order.objects.bulk_load(
                    orders,
                    progress=lambda done, offset=offset: self.show_progress(
                        offset + done, count, started
                    ),
                )
                lines += OrderItem.objects.bulk_load(self.lines_of(orders, products, rng))
        self.stdout.write("")
        self.stdout.write(
            self.style.SUCCESS(
                f"Loaded {count:,} orders and {lines:,} order lines "
                f"in {time.perf_counter() - started:.1f} s."
            )
        )

    @staticmethod
    def lines_of(
        orders: list[Order], products: list[Product], rng: random.Random
    ) -> Iterator[OrderItem]:
        for order in orders:
            for product in rng.sample(products, rng.randint(1, 3)):
                yield OrderItem(
                    order_id=order.pk,
                    product_id=product.pk,
                    quantity=rng.randint(1, 3),
                    unit_price=product.price,
                )

    def show_progress(self, done: int, total: int, started: float) -> None:
        width = 30
        filled = width * done // total
        rate = done / max(time.perf_counter() - started, 1e-9)
        self.stdout.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} orders "
            f"({done / total:.0%}, {rate:,.0f}/s)",
            ending="",
        )
        self.stdout.flush()


def backdated_key(when: datetime, sequence: int) -> int:
    """A key carrying the time ``when``, for demo data only: an application never makes keys
    in the past (:func:`django_snowflake.generate` gives the current time). seed_demo makes
    them only into an empty orders table, each with its own ``sequence``, so they are unique
    there."""
    generator = get_generator()
    lease = generator.ensure_lease()
    layout = generator.layout
    return layout.compose(
        layout.to_units(int(when.timestamp() * 1000)),
        worker_id=lease.worker_id,
        datacenter_id=lease.datacenter_id,
        sequence=sequence,
    )
