"""The tenant and domain models of tests/tenants_project.py (django-tenants' own mixins)."""

from __future__ import annotations

from django.db import models
from django_tenants.models import DomainMixin, TenantMixin


class Client(TenantMixin):
    name = models.CharField(max_length=100)
    auto_create_schema = True

    def __str__(self) -> str:
        return self.name


class Domain(DomainMixin):
    pass
