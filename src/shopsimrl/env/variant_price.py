"""Variant (SKU) price resolution (env_spec §8, ``variant-price-paper-v2``).

The displayed listing range is never the price paid: only a price that the selected options determine is
verifiable. Defect fixed: a product without ``pricing`` has no listing price (the reference invented 100).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..catalog.options import finite_price, index_options, option_match_key, price_affecting_axes
from ..versions import VARIANT_PRICE_VERSION


def _result(status: str, price: float | None, method: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "price": price, "version": VARIANT_PRICE_VERSION, "method": method, "evidence": evidence}


def listing_prices(pricing: Any) -> list[float]:
    """The listing prices the loader keeps: at most the first two entries; none when missing."""
    if not isinstance(pricing, Sequence) or isinstance(pricing, (str, bytes)):
        return []
    return [p for p in (finite_price(value) for value in list(pricing)[:2]) if p is not None]


def price_display(pricing: Any) -> str | None:
    """The page's price string: ``"a"`` for one price, ``"a to b"`` for a range, None without pricing."""
    if not isinstance(pricing, Sequence) or isinstance(pricing, (str, bytes)) or not pricing:
        return None
    values = list(pricing)[:2]
    return f"{values[0]}" if len(values) == 1 else f"{values[0]} to {values[1]}"


def resolve_variant_price(product: Mapping[str, Any], selected_options: object) -> dict[str, Any]:
    if not isinstance(selected_options, Mapping):
        return _result("unverifiable", None, "invalid_selected_options", {"reason": "selected_options_not_object"})
    options = product.get("customization_options")
    axes = price_affecting_axes(options)
    if len(axes) >= 2:
        return _result("unverifiable", None, "multiple_price_affecting_axes", {"price_affecting_axes": axes})
    indexed = index_options(options)
    if len(axes) == 1:
        axis = axes[0]
        if axis not in selected_options:
            return _result("unverifiable", None, "price_axis_unselected", {"price_axis": axis})
        price = indexed[axis].get(option_match_key(selected_options[axis]))
        if price is None:
            return _result("unverifiable", None, "selected_variant_price_missing", {"price_axis": axis})
        return _result("pass", price, "selected_price_axis", {"price_axis": axis})
    prices = sorted({p for entries in indexed.values() for p in entries.values() if p is not None})
    if len(prices) == 1:
        return _result("pass", prices[0], "constant_option_price", {})
    if not indexed:
        listing = listing_prices(product.get("pricing"))
        if len(set(listing)) == 1:
            return _result("pass", listing[0], "single_listing_price", {})
    return _result("unverifiable", None, "price_not_deterministic", {"candidate_prices": prices})
