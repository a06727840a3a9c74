"""A form field for Snowflake IDs, typed and shown as text."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from .conf import get_layout
from .exceptions import InvalidSnowflake


class SnowflakeFormField(forms.CharField):
    """Accepts a Snowflake ID as a string of digits (or an ``int``); cleans to an ``int``.

    The widget is a text input, not a number input: browsers and JavaScript hold numbers as
    doubles, exact only below ``2**53``, so a number input would round most IDs. Anything that
    is not an ID of the configured layout fails with the ``invalid`` error; an empty value
    cleans to ``None``. A whole number above the layout's largest ID fails with the
    ``max_value`` error instead, which names that ID.
    """

    default_error_messages = {
        "invalid": _("Enter a valid ID: a whole number of up to 19 digits."),
        "max_value": _("This ID is too large (the largest ID is %(max_id)s)."),
    }

    def to_python(self, value: Any) -> int | None:  # type: ignore[override]
        text = super().to_python(value)
        if text in self.empty_values:
            return None
        layout = get_layout()
        if layout.is_too_large(text):
            raise ValidationError(
                self.error_messages["max_value"], code="max_value", params={"max_id": layout.max_id}
            )
        try:
            return layout.validate(text)
        except InvalidSnowflake:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        attrs = super().widget_attrs(widget)
        if isinstance(widget, forms.TextInput):
            # A numeric keypad on phones, still a text value.
            attrs.setdefault("inputmode", "numeric")
        return attrs
