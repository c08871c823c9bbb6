"""Option values as sellers write them (``5斤装 新米``, ``黑色【现货速发】``), never fuzzy-equal to each other."""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any

from ..env.fuzzy import token_set_ratio
from .option_prices import is_quantity
from .rng import pick, pick_many
from .vocabulary import Vocabulary

SELLER_OPTION_SHARE = 0.6
"""Share of option axes whose values are seller strings (``5斤装 新米``, ``黑色【现货速发】``), not plain words."""
FEATURED_SHARE = 0.35
"""Of those, the share written as plain values with one featured value (``双缸22格【送赠品】``)."""
LONG_OPTION_SHARE = 0.5
"""Of the seller-style axes, the share whose values are long seller strings (a spec and a gift per value)."""
SELLER_FUZZY_LIMIT = 80
"""Two values of one axis must stay this dissimilar, so a wrong click never passes the reward's fuzzy match (> 85)."""


@lru_cache(maxsize=16384)
def _distinct_tuple(values: tuple[str, ...]) -> bool:
    return all(token_set_ratio(a, b) <= SELLER_FUZZY_LIMIT for i, a in enumerate(values) for b in values[i + 1 :])


def _distinct(values: list[str]) -> bool:
    """No two values fuzzy-equal under the reward's matcher (memoised: leaves repeat the same value lists)."""
    return _distinct_tuple(tuple(values))


def seller_values(axis: str, values: list[str], vocab: Vocabulary, rng: random.Random, domain: str = "",
                  foreign: tuple[str, ...] = ()) -> list[str]:
    """The values as a seller lists them: one pattern for the axis, or one featured value; plain when ambiguous.

    A pattern is kept only when every pair of values stays below the reward's fuzzy threshold, so the
    decorated gold value is still the only right click; the plain value stays a substring (``5斤`` in
    ``5斤装``), which is what a shopper's request names.
    """
    table = vocab.text["seller_options"]
    if rng.random() >= SELLER_OPTION_SHARE or not _distinct(values):
        return values
    if rng.random() < LONG_OPTION_SHARE:
        long = _long_values(axis, values, domain, table, rng, foreign)
        if long is not None:
            return long
    if rng.random() < FEATURED_SHARE:
        featured = rng.randrange(len(values))
        shown = [v + pick(rng, table["featured"]) if i == featured else v for i, v in enumerate(values)]
        return shown if _distinct(shown) else values
    if axis in table:
        templates = table[axis]
    elif is_quantity(values):
        templates = table["_amount"]
    else:
        templates = table["_default"]
    template = pick(rng, templates)
    shown = [template.format(v=v) for v in values]
    shown = [s.replace("装装", "装").replace("码码", "码") for s in shown]
    return shown if _distinct(shown) and len(set(shown)) == len(shown) else values


def _long_values(
    axis: str, values: list[str], domain: str, table: dict[str, Any], rng: random.Random,
    foreign: tuple[str, ...] = (),
) -> list[str] | None:
    """Every value with the axis's spec words and its own gift (``黑色 升级加厚款【送清洁刷】``); None when the
    gifts run out or two values would pass the reward's fuzzy match."""
    gifts: list[str] = [g for g in table["long_gifts"]["_common"] + table["long_gifts"].get(domain, [])
                        if not any(word in g for word in foreign)]  # no 逗猫棒 with dog food
    if len(values) > len(gifts):
        return None
    specs = table["long_specs"]
    key = axis if axis in specs else "_amount" if is_quantity(values) else "_default"
    spec = pick(rng, specs[key])
    shown = [v + spec + gift for v, gift in zip(values, pick_many(rng, gifts, len(values)), strict=True)]
    shown = [s.replace("装装", "装").replace("码码", "码") for s in shown]
    return shown if _distinct(shown) and len(set(shown)) == len(shown) else None
