from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from health_check.views import HealthCheckView

from django_snowflake.health import readiness_view
from django_snowflake.metrics import metrics_view

urlpatterns = [
    # The load balancer's readiness probe: 200 while this process can issue IDs at once, 503
    # before its lease lapses (never claims or queries).
    path("ready/", readiness_view, name="ready"),
    # django-health-check's page: the database, this process's readiness and each
    # database's key function and clock.
    path(
        "health/",
        HealthCheckView.as_view(
            checks=[
                "health_check.checks.Database",
                "django_snowflake.healthchecks.Readiness",
                "django_snowflake.healthchecks.DatabaseKeys",
            ]
        ),
        name="health_check",
    ),
    # Prometheus's scrape target.
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    # set_language, the target of the language switcher in the admin's header.
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("shop.urls")),
]
