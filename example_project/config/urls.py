from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # set_language, the target of the language switcher in the admin's header.
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("shop.urls")),
]
