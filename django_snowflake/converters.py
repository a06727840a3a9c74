"""The ``snowflake`` URL converter, registered by the app: ``path("orders/<snowflake:pk>/", ...)``."""

from __future__ import annotations

import re

from .conf import get_layout
from .exceptions import InvalidSnowflake


class SnowflakeConverter:
    """Matches up to 19 digits without a leading zero and converts them to an ``int``.

    Leading zeros are refused (``/orders/042/`` is not found), so each object has one
    canonical URL, the one :func:`~django.urls.reverse` builds. A value beyond the layout's
    IDs raises ``InvalidSnowflake`` (a ``ValueError``), so the URL does not match and Django
    answers 404 instead of handing the database a number that overflows its ``bigint``.
    """

    regex = "0|[1-9][0-9]{0,18}"

    def to_python(self, value: str) -> int:
        """The ID in ``value``; ``InvalidSnowflake`` (a ``ValueError``) for anything else.

        It checks :attr:`regex` itself too, so a view taking the ID as a plain string can call
        it and get the same verdict as the URL resolver.
        """
        if not isinstance(value, str) or not _CANONICAL.fullmatch(value):
            raise InvalidSnowflake(f"{str(value)[:40]!r} is not a canonical Snowflake ID")
        return get_layout().validate(value)

    def to_url(self, value: int | str) -> str:
        return str(get_layout().validate(value))


_CANONICAL = re.compile(SnowflakeConverter.regex)
