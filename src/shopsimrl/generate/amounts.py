"""Amount axes priced by their amount (issue 41 item 6: "flat-priced quantity axes only where real shops do that").

Read without units, 300ml / 600ml / 1L or 500G / 1T / 2T / 4T (1 < 600) and 5千毫安 / 1万毫安 are no rising amounts,
so such an axis could be listed at one price (500G/2T/4T all 1,599). :func:`unit_amount` reads the amount with its
unit (1L = 1000ml, 2T = 2048G, 1万毫安 = 10000毫安), and :func:`price_amounts` makes every amount axis of a product
either its price axis, priced rising with the amount (``products.quantity_prices``), or, where another axis already
carries the price (a bundle), an axis of the gold's one value (a shop sells that amount only).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from .option_prices import quantity_prices
from .products import ProductDraft

SIZE_AXES = ("尺码", "鞋码", "参考身高")
"""Size axes: real shops list every size at one price, so they are no amount axes."""
_FACTORS = {
    "毫升": 1.0, "ml": 1.0, "mL": 1.0, "L": 1000.0, "升": 1000.0,
    "千克": 1000.0, "公斤": 1000.0, "kg": 1000.0, "KG": 1000.0, "克": 1.0, "g": 1.0, "斤": 500.0,
    "GB": 1.0, "G": 1.0, "TB": 1024.0, "T": 1024.0, "毫安": 1.0, "mAh": 1.0,
    "厘米": 1.0, "cm": 1.0, "mm": 0.1, "米": 100.0, "寸": 1.0, "W": 1.0, "瓦": 1.0,
}
_COUNTS = "个支包格片只张双条块本头抽杯管盘色键合线粒瓶袋盒罐卷层人型"
_UNIT = "|".join(sorted(_FACTORS, key=len, reverse=True)) + "|刷头|[" + _COUNTS + "]"
_AMOUNT = re.compile(rf"(\d+(?:\.\d+)?)(千|万)?({_UNIT})")
_MULTIPLIERS = {"": 1.0, "千": 1000.0, "万": 10000.0}


def unit_amount(value: str) -> float | None:
    """The amount an option value names, in its unit's base (``1L`` → 1000, ``2T`` → 2048, ``1万毫安`` → 10000,
    ``5斤装`` → 2500, ``3本装`` → 3); None without a number followed by a unit (``苹果14``, ``44码``, ball sizes
    ``6号``, which are sizes)."""
    match = _AMOUNT.search(value)
    if match is None:
        return None
    number, multiplier, unit = match.groups()
    return float(number) * _MULTIPLIERS[multiplier or ""] * _FACTORS.get(unit, 1.0)


def amounts_of(axis: str, values: Sequence[str]) -> list[float] | None:
    """The amounts of an amount axis (two or more values, each an amount, all different; no size axis), else None."""
    if axis in SIZE_AXES or len(values) < 2:
        return None
    amounts = [unit_amount(v) for v in values]
    if any(a is None or a <= 0 for a in amounts) or len(set(amounts)) < len(amounts):
        return None
    return [float(a) for a in amounts if a is not None]


def _one_price(entries: Sequence[Mapping[str, Any]]) -> bool:
    return len({e.get("price") for e in entries}) == 1


def _rises(amounts: Sequence[float], prices: Sequence[Any]) -> bool:
    pairs = sorted(zip(amounts, prices, strict=True))
    return all(p is not None for p in prices) and all(b[1] > a[1] for a, b in pairwise(pairs))


def price_amounts(draft: ProductDraft, stream: str) -> ProductDraft:
    """Price every amount axis of ``draft`` by its amount (in place; the draft is returned for chaining). Draws come
    from a stream of the product's own (``stream`` and its ASIN), so the leaf's stream, and every later product,
    are not shifted by them."""
    if draft.two_axis:
        return draft
    rng = random.Random(f"{stream}:{draft.record['asin']}")
    options: dict[str, list[dict[str, Any]]] = draft.record["customization_options"]
    for axis, entries in options.items():
        amounts = amounts_of(axis, [str(e["value"]) for e in entries])
        if amounts is None or (axis in draft.price_axes and _rises(amounts, [e.get("price") for e in entries])):
            continue
        if draft.price_axes and axis not in draft.price_axes:
            if _one_price(entries):  # another axis carries the price: the listing sells the gold's amount only
                options[axis] = [e for e in entries if e["value"] == draft.gold[axis]]
            continue
        _price_axis(draft, axis, amounts, rng)
    return draft


def _price_axis(draft: ProductDraft, axis: str, amounts: list[float], rng: random.Random) -> None:
    """Make ``axis`` the product's price axis, its prices rising with the amount around the current price level."""
    options: dict[str, list[dict[str, Any]]] = draft.record["customization_options"]
    level = math.sqrt(min(draft.record["pricing"]) * max(draft.record["pricing"]))
    ordered = sorted(amounts)
    by_amount = dict(zip(ordered, quantity_prices(ordered, float(level), rng), strict=True))
    prices = [by_amount[a] for a in amounts]
    low = min(prices)
    for name, entries in options.items():
        for entry, price in zip(entries, prices if name == axis else [low] * len(entries), strict=True):
            if name == axis or entry.get("price") is not None:
                entry["price"] = price
    draft.price_axes = [axis]
    draft.record["pricing"] = [low, max(prices)]
    gold = next(p for e, p in zip(options[axis], prices, strict=True) if e["value"] == draft.gold[axis])
    draft.gold_price = gold
    above = [p for p in prices if p > gold]
    draft.dearer_price = min(above) if above else None


def flat_amount_share(records: Sequence[Mapping[str, Any]]) -> float:
    """Item 6 by the issue's definition: amount axes (every value an amount with a unit, sizes left out) whose
    values all give one price (one listed price, or none), over all amount axes of the archive."""
    axes = flat = 0
    for record in records:
        for axis, entries in record["customization_options"].items():
            if amounts_of(axis, [str(e["value"]) for e in entries]) is not None:
                axes += 1
                flat += _one_price(entries)
    return flat / max(1, axes)
