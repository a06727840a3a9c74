from __future__ import annotations

from rest_framework import serializers

from django_snowflake.rest_framework import SnowflakeModelSerializer

from .models import Order, OrderItem


class OrderItemSerializer(SnowflakeModelSerializer):
    class Meta:
        model = OrderItem
        fields = ["id", "product", "quantity", "unit_price"]


class OrderSerializer(SnowflakeModelSerializer):
    """IDs (``id``, ``customer``, items' ``product``) are strings: JavaScript-safe."""

    created_at = serializers.DateTimeField(read_only=True)
    total = serializers.DecimalField(max_digits=10, decimal_places=2, read_only=True)
    items = OrderItemSerializer(many=True, read_only=True)

    class Meta:
        model = Order
        fields = ["id", "created_at", "customer", "status", "total", "items"]
