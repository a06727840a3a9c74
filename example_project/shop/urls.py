from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("orders/<snowflake:pk>/", views.order_detail, name="order-detail"),
    path("api/orders/", views.OrderList.as_view(), name="api-order-list"),
    path("api/orders/<str:pk>/", views.OrderDetail.as_view(), name="api-order-detail"),
]
