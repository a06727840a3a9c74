from __future__ import annotations

from django_snowflake.rest_framework import SnowflakeModelSerializer

from .models import Event, Order, Ticket


class OrderSerializer(SnowflakeModelSerializer):
    class Meta:
        model = Order
        fields = ["id", "customer", "total", "items"]
        read_only_fields = ["items"]


class EventSerializer(SnowflakeModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "name", "tags"]


class TicketSerializer(SnowflakeModelSerializer):
    class Meta:
        model = Ticket
        fields = ["id", "code", "external_ref", "event"]
