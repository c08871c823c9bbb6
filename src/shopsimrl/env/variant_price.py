"""Variant (SKU) price resolution (docs/contract.md#variant-price, ``variant-price-paper-v2``) and the listing-price display.

The displayed listing range is never the price paid: only a price that the selected options determine is
verifiable. Defect fixed: a product without ``pricing`` has no listing price at all, where the
reference loader invented ``[100.0]``; such a product without option axes is unverifiable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalog.options import finite_price, index_options, option_match_key, price_affecting_axes
from ..versions import VARIANT_PRICE_VERSION

PASS = "pass"
UNVERIFIABLE = "unverifiable"
MAX_LISTING_PRICES = 2  # the loader keeps at most the first two ``pricing`` entries


def _result(status: str, price: float | None, method: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "price": price, "version": VARIANT_PRICE_VERSION, "method": method, "evidence": evidence}


def _kept_pricing(pricing: Any) -> list[Any]:
    """The ``pricing`` entries the loader keeps; anything but a list or tuple counts as no pricing."""
    if not isinstance(pricing, (list, tuple)):
        return []
    return list(pricing[:MAX_LISTING_PRICES])


def listing_prices(pricing: Any) -> list[float]:
    """The kept listing prices that are finite and non-negative, in order."""
    return [p for p in (finite_price(value) for value in _kept_pricing(pricing)) if p is not None]


def price_display(pricing: Any) -> str | None:
    """The page's ``Price`` string: ``"a"`` for one price, ``"a to b"`` for a range, None without pricing.

    Python's own ``str`` of each number is used, as the reference does (``199`` → ``"199"``,
    ``199.0`` → ``"199.0"``); the observation renders None as ``未提供``.
    """
    kept = _kept_pricing(pricing)
    if not kept:
        return None
    if len(kept) == 1:
        return f"{kept[0]}"
    return f"{kept[0]} to {kept[1]}"


def resolve_variant_price(product: Mapping[str, Any], selected_options: object) -> dict[str, Any]:
    """``{status, price, version, method, evidence}`` for an archive-format product and a selection."""
    if not isinstance(selected_options, Mapping):
        return _result(UNVERIFIABLE, None, "invalid_selected_options", {"reason": "selected_options_not_object"})
    options = product.get("customization_options")
    axes = price_affecting_axes(options)
    if len(axes) >= 2:
        return _result(UNVERIFIABLE, None, "multiple_price_affecting_axes", {"price_affecting_axes": axes})
    indexed = index_options(options)
    if len(axes) == 1:
        axis = axes[0]
        evidence = {"price_axis": axis}
        if axis not in selected_options:
            return _result(UNVERIFIABLE, None, "price_axis_unselected", evidence)
        price = indexed[axis].get(option_match_key(selected_options[axis]))
        if price is None:
            return _result(UNVERIFIABLE, None, "selected_variant_price_missing", evidence)
        return _result(PASS, price, "selected_price_axis", evidence)
    prices = sorted({price for entries in indexed.values() for price in entries.values() if price is not None})
    if len(prices) == 1:
        return _result(PASS, prices[0], "constant_option_price", {})
    if not indexed:
        listing = listing_prices(product.get("pricing"))
        if len(set(listing)) == 1:
            return _result(PASS, listing[0], "single_listing_price", {})
    return _result(UNVERIFIABLE, None, "price_not_deterministic", {"candidate_prices": prices})
