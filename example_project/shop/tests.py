"""The shop's own tests: ``python manage.py test --settings=config.test_settings``."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import TestCase
from django.urls import reverse
from django.utils import formats, timezone

from .factories import CustomerFactory, OrderFactory, OrderItemFactory, ProductFactory
from .models import Customer, Order, OrderItem


class OrderTests(TestCase):
    def test_keys_carry_the_creation_time(self) -> None:
        before = timezone.now() - timedelta(seconds=1)
        order = OrderFactory()
        self.assertLess(before, order.created_at)
        self.assertEqual(list(Order.objects.created_after(before)), [order])
        self.assertEqual(list(Customer.objects.created_before(before)), [])

    def test_order_page_and_bad_ids(self) -> None:
        item = OrderItemFactory()
        response = self.client.get(reverse("order-detail", args=[item.order.pk]))
        self.assertContains(response, str(item.product))
        for path in ["/orders/123/", "/orders/abc/", f"/orders/{2**63}/"]:
            self.assertEqual(self.client.get(path).status_code, 404)
        # One URL per order: the same digits with a leading zero are not found.
        self.assertEqual(self.client.get(f"/orders/0{item.order.pk}/").status_code, 404)

    def test_api_answers_a_malformed_id_like_an_unknown_one(self) -> None:
        order = OrderFactory()
        self.assertEqual(self.client.get(f"/api/orders/{order.pk}/").status_code, 200)
        unknown = self.client.get(f"/api/orders/{order.pk + 1}/")
        self.assertEqual(unknown.status_code, 404)
        self.assertEqual(unknown.json(), {"detail": "No Order matches the given query."})
        for bad in ["abc", f"0{order.pk}", str(2**63), "-1", "1.5", "%20"]:
            response = self.client.get(f"/api/orders/{bad}/")
            self.assertEqual(response.status_code, 404, bad)
            self.assertEqual(response["Content-Type"], "application/json", bad)
            self.assertEqual(response.json(), unknown.json(), bad)

    def test_api_ids_are_strings(self) -> None:
        item = OrderItemFactory()
        order = item.order
        data = self.client.get(reverse("api-order-detail", args=[order.pk])).json()
        self.assertEqual(data["id"], str(order.pk))
        self.assertEqual(data["customer"], str(order.customer_id))
        self.assertEqual(data["items"][0]["product"], str(item.product_id))
        self.assertEqual(data["total"], f"{item.subtotal:.2f}")

    def test_api_creates_orders_for_signed_in_users(self) -> None:
        customer = CustomerFactory()
        url = reverse("api-order-list")
        payload = {"customer": str(customer.pk), "status": "paid"}
        self.assertEqual(self.client.post(url, payload).status_code, 403)
        self.client.force_login(get_user_model().objects.create_user("clerk"))
        response = self.client.post(url, payload, content_type="application/json")
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual(Order.objects.get(pk=int(response.json()["id"])).customer, customer)
        response = self.client.post(url, {"customer": "1.5"}, content_type="application/json")
        self.assertEqual(response.status_code, 400)


class AdminTests(TestCase):
    def setUp(self) -> None:
        self.client.force_login(get_user_model().objects.create_superuser("boss"))

    def test_changelist_shows_decoded_times_with_the_today_filter(self) -> None:
        orders = OrderFactory.create_batch(3)
        response = self.client.get(reverse("admin:shop_order_changelist"), {"created": "today"})
        self.assertEqual(list(response.context["cl"].result_list), orders[::-1])
        # To the second, in the locale's date format; the millisecond on hover.
        local = timezone.localtime(orders[0].created_at)
        shown = f"{formats.date_format(local, 'DATE_FORMAT')} {local:%H:%M:%S}"
        self.assertContains(response, f'title="{local.isoformat(timespec="milliseconds")}"')
        self.assertContains(response, shown)

    def test_adding_an_order_with_items_in_the_admin(self) -> None:
        customer, product = CustomerFactory(), ProductFactory()
        response = self.client.post(
            reverse("admin:shop_order_add"),
            {
                "customer": customer.pk,
                "status": "pending",
                "items-TOTAL_FORMS": "1",
                "items-INITIAL_FORMS": "0",
                "items-0-product": product.pk,
                "items-0-quantity": "3",
                "items-0-unit_price": "2.50",
            },
        )
        self.assertEqual(response.status_code, 302)
        item = OrderItem.objects.get()
        self.assertEqual((item.order.customer, item.quantity), (customer, 3))

    def test_the_search_box_finds_pasted_order_ids(self) -> None:
        ada = CustomerFactory(name="Ada Lovelace")
        orders = [OrderFactory(customer=ada), OrderFactory(), OrderFactory()]
        url = reverse("admin:shop_order_changelist")
        for search, found in [
            (f" {orders[1].pk} ", [orders[1]]),
            (f"{orders[0].pk}, {orders[2].pk}", [orders[0], orders[2]]),
            ("Ada", [orders[0]]),
            (f"{orders[0].pk}x", []),
        ]:
            with self.subTest(search=search):
                response = self.client.get(url, {"q": search})
                self.assertEqual(set(response.context["cl"].result_list), set(found))

    def test_the_shops_names_speak_german(self) -> None:
        OrderFactory(status=Order.Status.SHIPPED)
        # LocaleMiddleware picks the language from the browser's Accept-Language.
        response = self.client.get(
            reverse("admin:shop_order_changelist"), headers={"accept-language": "de"}
        )
        self.assertContains(response, "Bestellung zur Änderung auswählen")
        self.assertContains(response, "Nach Status")
        self.assertContains(response, '<td class="field-status">Versandt</td>', html=True)


class SeedDemoTests(TestCase):
    def test_seed_demo_runs_twice(self) -> None:
        out = StringIO()
        call_command("seed_demo", stdout=out)
        call_command("seed_demo", stdout=out)
        output = out.getvalue()
        self.assertIn(
            "Created 5 products, 5 customers and 12 orders placed over the past 420 days.", output
        )
        self.assertIn("Demo data is already there; nothing added.", output)
        self.assertEqual(Order.objects.count(), 12)
        self.assertIn("username 'admin', password 'snowflake'", output)
        self.assertTrue(self.client.login(username="admin", password="snowflake"))

    def test_demo_orders_are_spread_over_time(self) -> None:
        # Before, all twelve shared one second: the created filter's choices equalled "All".
        call_command("seed_demo", stdout=StringIO())
        self.client.login(username="admin", password="snowflake")
        url = reverse("admin:shop_order_changelist")
        counts = {
            choice: self.client.get(url, {"created": choice}).context["cl"].result_count
            for choice in ["past_7_days", "this_year"]
        }
        self.assertEqual(counts["past_7_days"], 7)
        self.assertLess(counts["this_year"], 12)
        days = {order.created_at.date() for order in Order.objects.all()}
        self.assertGreater(len(days), 8)
