"""Budget phrases written the way shoppers write them, always consistent with the gold SKU price.

The kind proportions and phrase shapes come from ``vocab/budgets.json`` (taken from the real annotation
evidence). The ceiling a phrase implies is the one the budget parser computes: an approximate amount A
gives ``round(A * 1.1, 8)``, a hard bound or a range gives its upper end, and per-unit, lower-only and
missing budgets give no ceiling. Amounts are "round" numbers that admit the gold SKU.

The ceiling is near the gold price (:func:`near_ceiling`, median about 1.25×), so dearer SKUs and listings of
the leaf often do not fit and the price must be checked; a leaf holds enough listings between the gold and the
ceiling that the gold is rarely the dearest one that fits (``realism.v7_figures``, ``tells.budget_figures``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..budget import parse_budget
from .rng import pick

APPROXIMATE_MULTIPLIER = 1.1
UPPER_KINDS = ("approximate_upper", "hard_upper")
PARSE_RETRIES = 8
_DIGITS = "零一二三四五六七八九"


@dataclass(frozen=True, slots=True)
class Budget:
    """A budget clause and what it means; ``ceiling`` is None when the phrase sets no upper bound."""

    kind: str
    phrase: str
    amount: float | None
    ceiling: float | None


def weighted_choice(rng: random.Random, items: Sequence[tuple[float, Any]]) -> Any:
    """Pick one value of ``(weight, value)`` pairs (weights need not sum to 1)."""
    total = sum(weight for weight, _ in items)
    mark = rng.random() * total
    for weight, value in items:
        mark -= weight
        if mark < 0:
            return value
    return items[-1][1]


def approximate_ceiling(amount: float) -> float:
    return round(amount * APPROXIMATE_MULTIPLIER, 8)


def price_step(price: float) -> float:
    """The granularity people round a budget to at this price level."""
    for limit, step in ((20, 1.0), (100, 5.0), (500, 10.0), (2000, 50.0), (10000, 100.0)):
        if price < limit:
            return step
    return 500.0


def _section(number: int, rng: random.Random) -> str:
    """Chinese numerals for 1..9999 (standard form, with the colloquial 两 for a leading 2 of 百/千)."""
    parts: list[str] = []
    zero_pending = False
    for unit_value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = number // unit_value % 10
        if digit == 0:
            if parts:
                zero_pending = True
            continue
        if zero_pending:
            parts.append("零")
            zero_pending = False
        if digit == 1 and unit == "十" and not parts:
            parts.append("十")
            continue
        text = _DIGITS[digit]
        if digit == 2 and unit in ("千", "百") and not parts and rng.random() < 0.6:
            text = "两"
        parts.append(text + unit)
    return "".join(parts)


def chinese_numeral(number: int, rng: random.Random) -> str:
    """``1200`` → ``一千二百``, ``70`` → ``七十``, ``12000`` → ``一万二千``; ``number`` must be in 1..99,999,999."""
    if number <= 0 or number >= 100_000_000:
        raise ValueError(f"unsupported amount for Chinese numerals: {number}")
    high, low = divmod(number, 10000)
    text = (_section(high, rng) + "万") if high else ""
    if low:
        if high and low < 1000:
            text += "零"
        text += _section(low, rng)
    return text


def _format_amount(amount: float) -> str:
    return str(int(amount)) if float(amount).is_integer() else f"{amount:g}"


def _written_amount(amount: float, rng: random.Random, share: float) -> str:
    if float(amount).is_integer() and amount >= 10 and rng.random() < share:
        return chinese_numeral(int(amount), rng)
    return _format_amount(amount)


def _weighted_template(rng: random.Random, rows: Sequence[Sequence[Any]]) -> str:
    return str(weighted_choice(rng, [(float(weight), template) for weight, template in rows]))


def composed_template(rng: random.Random, groups: Sequence[Mapping[str, Sequence[str]]]) -> str:
    """A rare shape put together from parts (``预算`` + ``尽量控制在`` + amount + ``之内最好``): the long tail of real shapes.
    Each group's heads, links and tails combine freely; a group is drawn by its number of combinations."""
    sizes = [len(g["heads"]) * len(g["links"]) * len(g["tails"]) for g in groups]
    group = weighted_choice(rng, list(zip(map(float, sizes), groups, strict=True)))
    head, link = str(pick(rng, group["heads"])), str(pick(rng, group["links"]))
    if head and link and head[-1] == link[0]:  # 预算在 + 在… would say 在 twice
        link = link[1:]
    return f"{head}{link}{{n}}{{cur}}{pick(rng, group['tails'])}"


def _ceiling_of(kind: str, amount: float) -> float:
    return approximate_ceiling(amount) if kind == "approximate_upper" else float(amount)


CEILING_LOG_MEAN = 0.28
"""The ceiling over the gold SKU's price is ``exp(0.02 + Exponential(mean 0.28))``, capped at 4×: median 1.24×,
p75 1.5×, p95 2.4× before rounding, with no spike at the cap.
Real shoppers state a budget near what they buy, so the dearer SKUs and listings of the leaf often do not fit."""
MAX_CEILING_RATIO = 4.0
APPROXIMATE_LOG_MEAN = 0.22
"""A ``左右`` amount over the gold price is ``exp(-0.09 + Exponential(mean 0.22))`` (its ceiling, 1.1× the
amount, still admits the gold): median 1.05×, rarely above 2×, as an approximate budget names about the price."""
RANGE_LOW_LOG = (0.0, 0.12)
RANGE_HIGH_LOG = (0.02, 0.15)
"""A range (``价格在750-880元之间``) runs from the gold price over ``exp(U(0, 0.12))`` (rounded down) to the gold
price times ``exp(U(0.02, 0.15))`` (rounded up to a fitting amount): median high/low about 1.15 before rounding, as
in the real annotations (rarely over 2×)."""


def near_ceiling(gold: float, kind: str, rng: random.Random) -> float:
    """A target ceiling near the gold price (the distribution above); the amount is rounded from it."""
    if kind == "approximate_upper":
        ratio = math.exp(-0.09 + rng.expovariate(1 / APPROXIMATE_LOG_MEAN)) * APPROXIMATE_MULTIPLIER
    else:
        ratio = math.exp(0.02 + rng.expovariate(1 / CEILING_LOG_MEAN))
    return gold * min(max(ratio, 1.0), MAX_CEILING_RATIO)


def _fitting_amount(kind: str, gold: float, target: float, rng: random.Random) -> float:
    """A round amount near ``target`` whose ceiling admits ``gold``."""
    base = price_step(target)
    step = base * (5 if rng.random() < 0.1 and target > 10 * base else 2 if rng.random() < 0.3 else 1)
    if kind == "approximate_upper":
        amount = max(step, round(target / APPROXIMATE_MULTIPLIER / step) * step)
    else:
        amount = max(step, round(target / step) * step)
    while _ceiling_of(kind, amount) < gold:
        amount += step
    return float(amount)


PER_UNIT_WORDS = "个只支件瓶块包盒片张条根双套台份杯袋罐颗粒本把"
"""Classifiers the budget parser reads after 单 (``单支价格``); other leaves say 单个."""


def make_budget(
    rng: random.Random,
    table: Mapping[str, Any],
    gold_price: float,
    unit: str,
    kind: str | None = None,
    price_range: tuple[float, float] | None = None,
) -> Budget:
    """Draw a budget kind (unless given) and write its clause for a gold SKU costing ``gold_price``.

    The ceiling is drawn near the gold price (:func:`near_ceiling`); ``price_range`` is unused, kept so callers
    that pass the leaf's range need not change.
    """
    if kind is None:
        kind = weighted_choice(rng, [(w, k) for k, w in table["kind_weights"].items()])
    share = float(table["chinese_numeral_share"])
    currency = weighted_choice(rng, [(w, c) for c, w in table["currency_weights"].items()])
    if kind == "no_budget":
        return Budget(kind, "", None, None)
    if kind in UPPER_KINDS:
        target = near_ceiling(gold_price, kind, rng)
        if kind == "hard_upper" and rng.random() < float(table["hard_range_share"]):
            step = price_step(gold_price)
            high = math.ceil(gold_price * math.exp(rng.uniform(*RANGE_HIGH_LOG)) / step) * step
            low = math.floor(gold_price / math.exp(rng.uniform(*RANGE_LOW_LOG)) / step) * step
            if low > 0 and low < high:
                template = _weighted_template(rng, table["hard_range"])
                phrase = template.format(lo=_format_amount(low), hi=_format_amount(high))
                return Budget(kind, phrase, float(high), float(high))
        amount = _fitting_amount(kind, gold_price, target, rng)
        ceiling = _ceiling_of(kind, amount)
        composed = table.get("composed", {})
        for _ in range(PARSE_RETRIES):
            if kind in composed and rng.random() < float(composed["share"]):
                template = composed_template(rng, composed[kind])
            else:
                template = _weighted_template(rng, table[kind])
            phrase = template.format(n=_written_amount(amount, rng, share), cur=currency)
            if parse_budget(phrase) == ceiling:  # a real shape must read back as the intended ceiling
                return Budget(kind, phrase, float(amount), ceiling)
        phrase = table[kind][0][1].format(n=_format_amount(amount), cur="元")
        return Budget(kind, phrase, float(amount), ceiling)
    step = price_step(gold_price)
    if kind == "lower_only":
        amount = max(step, math.floor(gold_price * rng.uniform(0.4, 0.8) / step) * step)
        phrase = _weighted_template(rng, table[kind]).format(n=_format_amount(amount))
        return Budget(kind, phrase, float(amount), None)
    if kind == "non_total_price":
        per_unit = gold_price / rng.randint(2, 10)
        small = price_step(per_unit)
        amount = max(small, round(per_unit / small) * small)
        # leaves have their own classifiers; the parser reads 单X as a unit price only for its own list
        word = unit if unit in PER_UNIT_WORDS else "个"
        phrase = _weighted_template(rng, table[kind]).format(n=_format_amount(amount), unit=word)
        return Budget(kind, phrase, float(amount), None)
    raise ValueError(f"unknown budget kind {kind!r}")
