"""Option-value normalisation shared by cleaning (docs/contract.md#price-axes), variant price (docs/contract.md#variant-price) and display (docs/contract.md#catalog-archive).

Two different normalisations exist in the contract and both are needed:

* the *match key* (NFKC, casefold, ``/`` → ``|``, all whitespace removed) used to index option entries
  and to detect price-affecting axes;
* the *display value* (strip, ``/`` → `` | ``, ``str.lower``) that the agent sees and clicks.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

_WHITESPACE = re.compile(r"\s+")


def option_match_key(value: object) -> str:
    """Key used to compare option values across display and source forms."""
    text = unicodedata.normalize("NFKC", str(value)).casefold().replace("/", "|")
    return _WHITESPACE.sub("", text)


def display_option_value(value: object) -> str:
    """The value as shown on the product page and used in ``axis=value`` clicks."""
    return str(value).strip().replace("/", " | ").lower()


def finite_price(value: Any) -> float | None:
    """A usable option price: a finite, non-negative number (bools are not prices)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    price = float(value)
    if not math.isfinite(price) or price < 0:
        return None
    return price


def index_axis(entries: Any) -> dict[str, float | None]:
    """Map match key → price for one axis; non-dict entries and empty keys are ignored, later duplicates win."""
    indexed: dict[str, float | None] = {}
    if not isinstance(entries, (list, tuple)):
        return indexed
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        key = option_match_key(entry.get("value", ""))
        if not key:
            continue
        indexed[key] = finite_price(entry.get("price"))
    return indexed


def index_options(customization_options: Any) -> dict[str, dict[str, float | None]]:
    """Index every axis of ``customization_options`` (axis order kept; ``null`` axes skipped)."""
    if not isinstance(customization_options, Mapping):
        return {}
    return {
        str(axis): index_axis(entries)
        for axis, entries in customization_options.items()
        if entries is not None
    }


def price_affecting_axes(customization_options: Any) -> list[str]:
    """Axes whose entries carry more than one distinct known price, in axis order."""
    axes: list[str] = []
    for axis, indexed in index_options(customization_options).items():
        prices = {price for price in indexed.values() if price is not None}
        if len(prices) > 1:
            axes.append(axis)
    return axes
