"""The page a built-in policy decides from: the ``observation_state`` fields the model's text shows.

Built-in policies decide from what a model receives, never from hidden state, so they behave the same
in-process and behind the policy server. The text is read back by the renderer's own reader
(``env._observation.read_observation``); this module only gives policies a typed view of that state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import contract as words
from ..contract import MISSING_TEXT
from ..env._observation import read_observation

_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s+to\s+(-?\d+(?:\.\d+)?)\s*$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass
class PageItem:
    """A product as shown in a result list or on its page."""

    asin: str = ""
    title: str = ""
    price: str = ""
    brand: str = ""
    category: str = ""
    attributes: list[str] = field(default_factory=list)
    rank: int = 0

    def price_bounds(self) -> tuple[float, float] | None:
        return price_bounds(self.price)


@dataclass
class Page:
    """The parsed page: its kind, the listed or opened product, options and the clickable values."""

    kind: str  # search_home | search_results | product_detail | terminal | unknown
    items: list[PageItem] = field(default_factory=list)
    product: PageItem | None = None
    options: dict[str, list[str]] = field(default_factory=dict)
    selected: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    clickables: list[str] = field(default_factory=list)
    search_text: str = ""
    page_number: int = 0
    total_pages: int = 0
    last_valid: bool | None = None


def price_bounds(text: str) -> tuple[float, float] | None:
    """``"800.0 to 1350.0"`` → (800, 1350); ``"1099.0"`` or ``"[299]"`` → (x, x); 未提供 → None."""
    if not text or text == MISSING_TEXT:
        return None
    match = _RANGE.match(text)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        return (min(low, high), max(low, high))
    numbers = [float(n) for n in _NUMBER.findall(text)]
    if not numbers:
        return None
    return (min(numbers), max(numbers))


def _item(product: Mapping[str, Any]) -> PageItem:
    return PageItem(
        asin=str(product.get("asin", "")), title=str(product.get("title", "")), price=str(product.get("price", "")),
        brand=str(product.get("brand", "")), category=str(product.get("category", "")),
        attributes=list(product.get("key_attributes") or []), rank=int(product.get("rank") or 0),
    )


def page_from_state(state: Mapping[str, Any]) -> Page:
    """A :class:`Page` over the ``observation_state`` fields a text shows (:func:`read_observation`'s result)."""
    kind = str(state.get("page_type", "unknown"))
    product = state.get("product")
    last = state.get("last_action")
    return Page(
        kind=words.PRODUCT_DETAIL if kind == words.INFORMATION_SUBPAGE else kind,
        items=[_item(item) for item in state.get("products") or ()],
        product=_item(product) if isinstance(product, Mapping) else None,
        options={axis: list(values) for axis, values in (state.get("available_options") or {}).items()},
        selected=dict(state.get("selected_options") or {}),
        missing=list(state.get("missing_option_axes") or []),
        clickables=list(state.get("actions") or []),
        search_text=str(state.get("search_text", "")),
        page_number=int(state.get("page") or 0),
        total_pages=int(state.get("total_pages") or 0),
        last_valid=bool(last["valid"]) if isinstance(last, Mapping) and "valid" in last else None,
    )


def parse_page(text: str) -> Page:
    """The page a text-only agent sees: the state the renderer's own reader finds in ``text``."""
    return page_from_state(read_observation(text))
