"""The example shop as an ASGI application (the example ships only a WSGI module)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "stress.example_settings")
application = get_asgi_application()
