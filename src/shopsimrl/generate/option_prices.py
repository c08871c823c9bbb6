"""Option prices: amounts read from values, shop-style rounding, prices along an axis."""

from __future__ import annotations

import math
import random
import re
from itertools import pairwise

from .rng import pick

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def is_quantity(values: list[str] | tuple[str, ...]) -> bool:
    """Every value carries a number and the numbers rise strictly along the listed order (规格/容量/重量…)."""
    amounts = [amount_of(v) for v in values]
    return all(a is not None and a > 0 for a in amounts) and all(
        b > a for a, b in pairwise(amounts)  # type: ignore[operator]
    )


def amounts_rise(values: list[str] | tuple[str, ...]) -> bool:
    """Values whose numbers rise along the list (无卡, 加64G卡, 加128G卡) are priced in that order too."""
    amounts = [a for a in (amount_of(v) for v in values) if a is not None]
    return len(amounts) >= 2 and all(b > a for a, b in pairwise(amounts))


def taobao_price(value: float, rng: random.Random) -> float:
    """Round a raw price the way shops list them (9.9, 39.9, 128, 1099 …)."""
    if value < 20:
        price = math.floor(value) + pick(rng, (0.9, 0.9, 0.5, 0.0))
    elif value < 200:
        price = math.floor(value) + pick(rng, (0.0, 0.9, 0.0, 0.8))
    elif value < 1000:
        price = math.floor(value / 10) * 10 + pick(rng, (9, 8, 0, 5))
    else:
        price = math.floor(value / 100) * 100 + pick(rng, (99, 88, 0, 50))
    return round(float(max(price, 1.0)), 2)


def amount_of(value: str) -> float | None:
    """The first number of an option value (``5斤装`` → 5.0), None when it has none."""
    match = _NUMBER.search(value)
    return float(match.group()) if match else None


def quantity_prices(amounts: list[float], base: float, rng: random.Random) -> list[float]:
    """Prices rising with the amount and sub-linearly per unit: ``base * (a / a0) ** e``, e in 0.7–0.9."""
    exponent = rng.uniform(0.7, 0.9)
    middle = amounts[(len(amounts) - 1) // 2]  # the leaf's price level describes a mid-size listing
    prices = [taobao_price(base * (a / middle) ** exponent * rng.uniform(0.98, 1.02), rng) for a in amounts]
    for i in range(1, len(prices)):  # rounding must not let a larger amount cost the same or less
        if prices[i] <= prices[i - 1]:
            prices[i] = round(prices[i - 1] + max(1.0, prices[i - 1] * 0.05), 2)
    return prices


def axis_prices(count: int, base: float, ordered: bool, rng: random.Random) -> list[float]:
    raw: list[float] = []
    current = base
    for index in range(count):
        if ordered:
            if index:
                current *= 1 + rng.uniform(0.06, 0.3)
            raw.append(current)
        else:
            raw.append(base if index == 0 else base * (1 + rng.uniform(0.0, 0.45)))
    prices = [taobao_price(value, rng) for value in raw]
    if len(set(prices)) < 2:
        prices[-1] = round(prices[-1] + max(1.0, prices[-1] * 0.1), 2)
    return prices
