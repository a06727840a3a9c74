from __future__ import annotations

from decimal import Decimal

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from django_snowflake.admin import SnowflakeAdminMixin, SnowflakeCreatedFilter

from .models import Customer, Order, OrderItem, Product

# The admin's navigation sidebar takes a quarter of a 1280-pixel screen: without it the order
# list shows every key, name and time on one line, in German too.
admin.site.enable_nav_sidebar = False


class OrderItemInline(admin.TabularInline):
    model = OrderItem
    extra = 1
    autocomplete_fields = ["product"]


@admin.register(Order)
class OrderAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    # SnowflakeAdminMixin adds the "created" column, newest-first ordering and, on the
    # change page, the breakdown of the ID.
    list_display = ["number", "customer", "status", "total"]
    list_filter = [SnowflakeCreatedFilter, "status"]
    list_select_related = ["customer"]
    # The mixin also finds orders by ID: paste one or several into the search box.
    search_fields = ["customer__name", "customer__email"]
    inlines = [OrderItemInline]

    @admin.display(description=_("order"), ordering="pk")
    def number(self, order: Order) -> int:
        # The key alone: "Order 2514..." broke over two lines at 1280 pixels.
        return order.pk

    @admin.display(description=_("total"))
    def total(self, order: Order) -> Decimal:
        return order.total


@admin.register(Customer)
class CustomerAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    list_display = ["name", "email"]
    list_filter = [SnowflakeCreatedFilter]
    search_fields = ["name", "email"]


@admin.register(Product)
class ProductAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    list_display = ["sku", "name", "price"]
    search_fields = ["sku", "name"]
