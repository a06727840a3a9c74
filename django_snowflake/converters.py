"""The ``snowflake`` URL converter, registered by the app: ``path("orders/<snowflake:pk>/", ...)``."""

from __future__ import annotations

from .conf import get_layout


class SnowflakeConverter:
    """Matches up to 19 digits and converts them to an ``int``.

    A value beyond the layout's IDs raises ``InvalidSnowflake`` (a ``ValueError``), so the
    URL does not match and Django answers 404 instead of handing the database a number that
    overflows its ``bigint``.
    """

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        return get_layout().validate(value)

    def to_url(self, value: int | str) -> str:
        return str(get_layout().validate(value))
