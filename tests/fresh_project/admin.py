"""shop/admin.py of the fresh project."""

from __future__ import annotations

from django.contrib import admin

from .models import Product  # type: ignore[import-not-found]

admin.site.register(Product)
