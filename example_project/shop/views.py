from __future__ import annotations

from datetime import timedelta

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from rest_framework import generics

from django_snowflake.converters import SnowflakeConverter

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
    """``pk`` arrives as text (``<str:pk>``), so a malformed ID gets the API's JSON 404.

    Behind the ``snowflake`` converter, ``/api/orders/abc/`` would not match any URL and
    Django would answer with its HTML 404 page; here it reads exactly as an unknown ID does.
    """

    queryset = Order.objects.select_related("customer").prefetch_related("items")
    serializer_class = OrderSerializer

    def get_object(self) -> Order:
        try:
            self.kwargs["pk"] = SnowflakeConverter().to_python(self.kwargs["pk"])
        except ValueError:
            # The message Django's get_object_or_404 gives an unknown ID.
            raise Http404(f"No {Order._meta.object_name} matches the given query.") from None
        return super().get_object()
