"""Budget phrases written the way shoppers write them, always consistent with the gold SKU price.

The kind proportions and phrase shapes come from ``vocab/budgets.json`` (taken from the real annotation
evidence). The ceiling a phrase implies is the one the budget parser computes: an approximate amount A
gives ``round(A * 1.1, 8)``, a hard bound or a range gives its upper end, and per-unit, lower-only and
missing budgets give no ceiling. Amounts are "round" numbers near the gold price, chosen so the gold SKU
fits and, where the product has a dearer SKU, that SKU does not.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..budget import parse_budget

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


def _upper_amount(kind: str, gold: float, step: float, rng: random.Random) -> float:
    if kind == "approximate_upper":
        amount = max(step, round(gold / step) * step)
        while approximate_ceiling(amount) < gold:
            amount += step
        return amount
    amount = max(step, math.ceil(gold / step - 1e-9) * step)
    if rng.random() < 0.2:
        amount += step
    return amount


def _ceiling_of(kind: str, amount: float) -> float:
    return approximate_ceiling(amount) if kind == "approximate_upper" else float(amount)


def _fitting_amount(kind: str, gold: float, dearer: float | None, rng: random.Random) -> float:
    """A round amount whose ceiling admits ``gold`` and, if possible, excludes the next dearer SKU."""
    base = price_step(gold)
    coarse = base * (5 if rng.random() < 0.15 else 2 if rng.random() < 0.3 else 1)
    candidates = [coarse, base, base / 2, base / 5, 1.0]
    first: float | None = None
    for step in candidates:
        if step < 1.0:
            continue
        amount = _upper_amount(kind, gold, step, rng)
        if first is None:
            first = amount
        if dearer is None or _ceiling_of(kind, amount) < dearer:
            return amount
    assert first is not None
    return first


PER_UNIT_WORDS = "个只支件瓶块包盒片张条根双套台份杯袋罐颗粒本把"
"""Classifiers the budget parser reads after 单 (``单支价格``); other leaves say 单个."""


def make_budget(
    rng: random.Random,
    table: Mapping[str, Any],
    gold_price: float,
    dearer_price: float | None,
    unit: str,
    kind: str | None = None,
) -> Budget:
    """Draw a budget kind (unless given) and write its clause for a gold SKU costing ``gold_price``."""
    if kind is None:
        kind = weighted_choice(rng, [(w, k) for k, w in table["kind_weights"].items()])
    share = float(table["chinese_numeral_share"])
    currency = weighted_choice(rng, [(w, c) for c, w in table["currency_weights"].items()])
    if kind == "no_budget":
        return Budget(kind, "", None, None)
    if kind in UPPER_KINDS:
        if kind == "hard_upper" and rng.random() < float(table["hard_range_share"]):
            high = _fitting_amount(kind, gold_price, dearer_price, rng)
            step = price_step(gold_price)
            low = high - step * rng.randint(1, 3)
            low = min(low, math.floor(gold_price / step) * step)
            if low > 0 and low < high:
                template = _weighted_template(rng, table["hard_range"])
                phrase = template.format(lo=_format_amount(low), hi=_format_amount(high))
                return Budget(kind, phrase, float(high), float(high))
        amount = _fitting_amount(kind, gold_price, dearer_price, rng)
        ceiling = _ceiling_of(kind, amount)
        for _ in range(PARSE_RETRIES):
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
        # v5 leaves have their own classifiers; the parser reads 单X as a unit price only for its own list
        word = unit if unit in PER_UNIT_WORDS else "个"
        phrase = _weighted_template(rng, table[kind]).format(n=_format_amount(amount), unit=word)
        return Budget(kind, phrase, float(amount), None)
    raise ValueError(f"unknown budget kind {kind!r}")
