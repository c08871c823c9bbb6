"""A fast deep copy for the plain JSON-like data the catalog hands out (dicts, lists, tuples, scalars).

``copy.deepcopy`` keeps a memo and dispatches on every object, which made copying a goal and its persona at
each episode end a visible share of a step; this copier handles only what catalog records contain and keeps
their types (a tuple stays a tuple), so results are equal to ``deepcopy``'s. Anything else is deep-copied.
"""

from __future__ import annotations

import copy
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def plain_copy(value: Any) -> Any:
    """An independent copy of ``value``; equal to ``copy.deepcopy(value)`` for JSON-like data."""
    if isinstance(value, _SCALARS):
        return value
    kind = type(value)
    if kind is dict:
        return {key: plain_copy(item) for key, item in value.items()}
    if kind is list:
        return [plain_copy(item) for item in value]
    if kind is tuple:
        return tuple(plain_copy(item) for item in value)
    return copy.deepcopy(value)
