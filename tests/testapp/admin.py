from __future__ import annotations

from django.contrib import admin

from django_snowflake.admin import SnowflakeAdminMixin, SnowflakeCreatedFilter

from .models import Customer, Order


@admin.register(Order)
class OrderAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "customer", "total"]
    list_filter = [SnowflakeCreatedFilter]


@admin.register(Customer)
class CustomerAdmin(SnowflakeAdminMixin, admin.ModelAdmin):
    fieldsets = [(None, {"fields": ["name"]})]
    ordering = ["name"]
    search_fields = ["name"]
