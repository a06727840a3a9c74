from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from rest_framework import generics

from .models import Order
from .serializers import OrderSerializer


def home(request: HttpRequest) -> HttpResponse:
    """The orders of the last 24 hours: a range on the primary key, no created_at column."""
    since = timezone.now() - timedelta(days=1)
    orders = Order.objects.created_after(since).select_related("customer").order_by("-pk")
    return render(request, "shop/home.html", {"orders": orders[:20], "since": since})


def order_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """``pk`` comes through the ``snowflake`` converter: an int, or a 404 for anything else."""
    order = get_object_or_404(Order.objects.select_related("customer"), pk=pk)
    return render(request, "shop/order_detail.html", {"order": order})


class OrderList(generics.ListCreateAPIView):
    queryset = Order.objects.select_related("customer").prefetch_related("items").order_by("-pk")
    serializer_class = OrderSerializer


class OrderDetail(generics.RetrieveUpdateAPIView):
    queryset = Order.objects.select_related("customer").prefetch_related("items")
    serializer_class = OrderSerializer
