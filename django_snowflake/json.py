"""JSON that browsers read exactly: integers beyond JavaScript's safe range become strings.

A JavaScript number is a double, exact only up to ``2**53 - 1`` (``Number.MAX_SAFE_INTEGER``);
``JSON.parse`` silently rounds a larger integer, and a Snowflake ID made more than about 25
days after the epoch is larger. :class:`SnowflakeJSONEncoder` writes every integer outside
``±(2**53 - 1)`` as a string of digits and every other value as Django's
``DjangoJSONEncoder`` does.

The rule is by value, not by field: an encoder sees plain ``int`` objects and cannot tell a
key from a count, so it quotes exactly the integers a browser would corrupt, whatever they
are. Keys below ``2**53`` (rows from before a migration to Snowflake keys, a ``js_safe``
layout) stay numbers, which the browser reads exactly. Clients that want every key as a
string, whatever its size, get that from :class:`django_snowflake.rest_framework.SnowflakeField`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django.core.serializers.json import DjangoJSONEncoder

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "MAX_SAFE_INTEGER",
    "SnowflakeJSONEncoder",
    "SnowflakeJSONEncoderMixin",
    "js_safe",
]
# SnowflakeJSONRenderer (below) is left out of __all__: a star import must not need DRF.

MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: the largest integer every larger one is told from."""


def js_safe(value: Any) -> Any:
    """Return ``value`` with every integer outside ``±MAX_SAFE_INTEGER`` turned into a string.

    Dicts, lists and tuples are copied (tuples become lists, as JSON writes them); everything
    else is returned as it is. ``bool`` is left alone although it is an ``int``. A container
    that holds itself is left in place on the second visit, so the encoder still reports the
    circular reference instead of this function recursing without end.
    """
    return _js_safe(value, set())


# Values returned as they are, by exact type: most of a response, checked without a call.
_LEAVES = frozenset({str, float, bool, type(None)})


def _is_leaf(value: Any) -> bool:
    kind = type(value)
    return kind in _LEAVES or (kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)


def _js_safe(value: Any, path: set[int]) -> Any:
    if isinstance(value, int):
        if not isinstance(value, bool) and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(int(value))  # int(): an IntEnum's str() is its name
        return value
    if not isinstance(value, dict | list | tuple) or id(value) in path:
        return value
    path.add(id(value))
    try:
        if isinstance(value, dict):
            return {
                key: item if _is_leaf(item) else _js_safe(item, path) for key, item in value.items()
            }
        return [item if _is_leaf(item) else _js_safe(item, path) for item in value]
    finally:
        path.discard(id(value))


class SnowflakeJSONEncoderMixin:
    """Put in front of any ``json.JSONEncoder`` subclass to quote unsafe integers.

    ``json`` writes an ``int`` itself and never asks ``default()`` about it, so the data is
    made safe before encoding, and so is whatever ``default()`` turns an unknown object into
    (a ``QuerySet`` into a tuple, for instance).
    """

    def iterencode(self, o: Any, _one_shot: bool = False) -> Iterator[str]:
        chunks: Iterator[str] = super().iterencode(js_safe(o), _one_shot)  # type: ignore[misc]
        return chunks

    def default(self, o: Any) -> Any:
        return js_safe(super().default(o))  # type: ignore[misc]


class SnowflakeJSONEncoder(SnowflakeJSONEncoderMixin, DjangoJSONEncoder):
    """A ``DjangoJSONEncoder`` that writes every integer outside ``±(2**53 - 1)`` as a string.

    ``JsonResponse(data, encoder=SnowflakeJSONEncoder)``,
    ``serializers.serialize("json", queryset, cls=SnowflakeJSONEncoder)``,
    ``json.dumps(data, cls=SnowflakeJSONEncoder)``.
    """


def __getattr__(name: str) -> Any:
    # The renderer needs Django REST framework, an optional dependency: it is built when
    # first asked for (DRF's settings import it by its dotted path), so this module imports
    # without DRF.
    if name == "SnowflakeJSONRenderer":
        return _build_renderer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _build_renderer() -> type:
    from rest_framework.renderers import JSONRenderer
    from rest_framework.utils.encoders import JSONEncoder

    class SnowflakeDRFJSONEncoder(SnowflakeJSONEncoderMixin, JSONEncoder):
        """DRF's own encoder (its formats for times, decimals, durations), unsafe ints quoted."""

    class SnowflakeJSONRenderer(JSONRenderer):
        """DRF's ``JSONRenderer``, writing every integer outside ``±(2**53 - 1)`` as a string.

        Set it first in ``REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"]`` as
        ``"django_snowflake.json.SnowflakeJSONRenderer"``.
        """

        encoder_class = SnowflakeDRFJSONEncoder

    for cls in (SnowflakeDRFJSONEncoder, SnowflakeJSONRenderer):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return SnowflakeJSONRenderer
