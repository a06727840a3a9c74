from __future__ import annotations

from django.contrib import admin

from django_snowflake.admin import SnowflakeAdminMixin, SnowflakeCreatedFilter

from .models import Customer, Order, OrderItem, Product


class OrderItemInline(admin.TabularInline):
    model = OrderItem
    extra = 1
    autocomplete_fields = ["product"]


@admin.register(Order)
class OrderAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    # SnowflakeAdminMixin adds the "created" column, newest-first ordering and, on the
    # change page, the breakdown of the ID.
    list_display = ["__str__", "customer", "status", "total"]
    list_filter = [SnowflakeCreatedFilter, "status"]
    list_select_related = ["customer"]
    search_fields = ["customer__name", "customer__email"]
    inlines = [OrderItemInline]


@admin.register(Customer)
class CustomerAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    list_display = ["name", "email"]
    list_filter = [SnowflakeCreatedFilter]
    search_fields = ["name", "email"]


@admin.register(Product)
class ProductAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    list_display = ["sku", "name", "price"]
    search_fields = ["sku", "name"]
