from __future__ import annotations

from django.contrib import admin
from django.urls import path

from tests.testapp import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("orders/<snowflake:pk>/", views.order_detail, name="order-detail"),
    path("api/orders/", views.OrderList.as_view(), name="api-order-list"),
    path("api/orders/<snowflake:pk>/", views.OrderDetail.as_view(), name="api-order-detail"),
    path("api/events/", views.EventList.as_view(), name="api-event-list"),
    path("api/tickets/", views.TicketList.as_view(), name="api-ticket-list"),
]
