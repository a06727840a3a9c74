from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from rest_framework import generics

from .models import Event, Order, Ticket
from .serializers import EventSerializer, OrderSerializer, TicketSerializer


def order_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A plain view behind the ``snowflake`` converter: ``pk`` arrives as an ``int``."""
    order = get_object_or_404(Order, pk=pk)
    return HttpResponse(f"{order.pk} {order.created_at.isoformat()}", content_type="text/plain")


class OrderAPI(generics.GenericAPIView):
    """What the order endpoints share: every order, as OrderSerializer writes it."""

    queryset = Order.objects.all()
    serializer_class = OrderSerializer


class OrderList(OrderAPI, generics.ListCreateAPIView):
    pass


class OrderDetail(OrderAPI, generics.RetrieveUpdateAPIView):
    pass


class EventList(generics.ListCreateAPIView):
    queryset = Event.objects.all()
    serializer_class = EventSerializer


class TicketList(generics.ListCreateAPIView):
    queryset = Ticket.objects.all()
    serializer_class = TicketSerializer
