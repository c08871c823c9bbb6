"""Shoppers: the persona fields that belong to the user, fixed across every task they own.

Demographics, region, trading habits (平均客单价 from the ceilings the user states, :func:`spend_level`), tags (one
rule set, ``persona_rules.rule_violations``) and a price level within any leaf's range are drawn once per user, so
a repeat user's fields do not change between tasks and the price fields never follow the gold price.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from .budgets import price_step, weighted_choice
from .persona_rules import rule_violations
from .rng import pick, pick_many
from .vocabulary import Vocabulary


@dataclass
class User:
    """The stable part of a persona, shared by every task of the user."""

    user_id: str
    demographics: dict[str, Any]
    region: dict[str, Any]
    trading: dict[str, Any]
    tags: list[str]
    brand_noise: list[str]
    task_count: int = 0
    domains: list[str] = field(default_factory=list)
    price_level: float = 0.5
    """Where in a leaf's price range this shopper buys (0 cheapest, 1 dearest); fixed per user."""
    price_width: float = 0.3
    held_out: bool = False
    """The user's tasks fall into the val/test persona split (predicted), so they draw held-out phrasing."""
    price_ranges: dict[str, dict[str, float]] = field(default_factory=dict)


def _pairs(rows: list[list[Any]]) -> list[tuple[float, Any]]:
    return [(float(weight), value) for value, weight in rows]


_LEVEL_SPEND = {"低": (60.0, 0.2), "中": (150.0, 0.45), "中高": (320.0, 0.65), "高": (700.0, 0.8)}
"""Consumption level → (typical 平均客单价, price level within a leaf): the user's, never the gold's."""
_LEVELS = ("低", "中", "中高", "高")
_LEVEL_LIMITS = (80.0, 250.0, 700.0)
"""平均客单价 below 80 is 低, below 250 中, below 700 中高, else 高 (one level off in 15% of users)."""
SPEND_LOG = (-0.25, 0.3)
"""平均客单价 is the geometric mean of the user's stated budgets times ``exp(N(-0.25, 0.3))``: what a person
usually pays sits a little below the ceilings they state, across every category they shop in."""
_LEVEL_TAG = {"低": "low", "中": "mid", "中高": "high", "高": "high"}


def life_tags(vocab: Vocabulary) -> list[str]:
    """Every domain tag of the vocabulary (宝妈, 夜市经营者, 学生党 …), in vocabulary order."""
    return list(dict.fromkeys(tag for leaf in vocab.leaves for tag in leaf.tags))


def spend_level(levels: list[float], rng: random.Random) -> tuple[float, str]:
    """(平均客单价, 消费等级) from the budget levels of the user's tasks (their stated ceilings)."""
    mean = math.exp(sum(math.log(level) for level in levels) / len(levels))
    spend = round(mean * math.exp(rng.gauss(*SPEND_LOG)), 2)
    rank = sum(spend >= limit for limit in _LEVEL_LIMITS)
    if rng.random() < 0.15:
        rank = min(len(_LEVELS) - 1, max(0, rank + pick(rng, (-1, 1))))
    return spend, _LEVELS[rank]


def make_user(
    user_id: str, vocab: Vocabulary, noise_brands: list[str], rng: random.Random, levels: list[float] | None = None
) -> User:
    """A shopper: demographics, region, trading habits, price level and tags, all fixed across their tasks.

    ``levels`` (the budget levels of the user's tasks) set 平均客单价 and 消费等级, so the fields agree with the
    ceilings the user states; without them both are drawn from the consumption level alone."""
    data = vocab.personas
    province = pick(rng, list(data["regions"]))
    city = pick(rng, data["regions"][province])
    age = weighted_choice(rng, _pairs(data["age_bands"]))
    gender = weighted_choice(rng, _pairs(data["genders"]))
    rules = data["occupation_rules"]
    occupations = [
        job
        for job in data["occupations"]
        if all(value in rules.get(job, {}).get(key, [value]) for key, value in (("性别", gender), ("年龄段", age)))
    ]
    demographics = {
        "年龄段": age,
        "性别": gender,
        "会员等级": weighted_choice(rng, _pairs(data["member_levels"])),
        "消费等级": pick(rng, data["consumption_levels"]),
        "职业": pick(rng, occupations),
    }
    region = {"省份": province, "城市": city, "区县": pick(rng, data["city_districts"][city]), "时区": "UTC+8"}
    spend, level = _LEVEL_SPEND[str(demographics["消费等级"])]
    spend = round(spend * math.exp(rng.gauss(0.0, 0.45)), 2)
    if levels:
        spend, demographics["消费等级"] = spend_level(levels, rng)
        level = _LEVEL_SPEND[str(demographics["消费等级"])][1]
    trading = {
        "复购率": round(rng.uniform(0.05, 0.75), 2),
        "是否促销敏感": rng.random() < 0.45,
        "支付方式偏好": pick(rng, data["payments"]),
        "近一年订单数": rng.randint(3, 180),
        "平均客单价": spend,
    }
    fitting = [tag for tag in life_tags(vocab) if not rule_violations(demographics, [tag])]
    tags = [
        *pick_many(rng, fitting, rng.randint(1, 2)),
        *pick_many(rng, data["general_tags"], rng.randint(0, 2)),
        data["price_tags"][_LEVEL_TAG[str(demographics["消费等级"])]],
    ]
    brands = pick_many(rng, noise_brands, min(len(noise_brands), rng.randint(1, 2)))
    user = User(user_id, demographics, region, trading, list(dict.fromkeys(tags)), brands)
    user.price_level = min(0.95, max(0.05, level + rng.uniform(-0.15, 0.15)))
    user.price_width = rng.uniform(0.2, 0.4)
    return user


RANGE_FROM_CEILING = ((0.35, 1.1), (-0.1, 0.35))
"""价格区间 is the stated ceiling over ``exp(U(0.35, 1.1))`` to the ceiling times ``exp(U(-0.1, 0.35))``."""


def user_price_range(
    user: User, leaf_range: tuple[float, float], leaf_name: str, ceiling: float | None = None,
    rng: random.Random | None = None,
) -> dict[str, float]:
    """The user's 价格区间 for a leaf, the same for every task of the user in that leaf.

    Drawn around the stated ceiling when there is one (the request already says it, so the field tells nothing
    about the gold beyond it and the ceiling does not fall outside it); without a ceiling, the user's price level
    within the leaf's range."""
    if leaf_name not in user.price_ranges:
        low, high = leaf_range
        span = math.log(high / low)
        lo = low * math.exp(span * max(0.0, user.price_level - user.price_width))
        hi = low * math.exp(span * min(1.0, user.price_level + user.price_width))
        if ceiling is not None and rng is not None:
            lo = ceiling / math.exp(rng.uniform(*RANGE_FROM_CEILING[0]))
            hi = ceiling * math.exp(rng.uniform(*RANGE_FROM_CEILING[1]))
        step = price_step(lo)
        user.price_ranges[leaf_name] = {
            "最小值": max(0.0, math.floor(lo / step) * step), "最大值": math.ceil(hi / price_step(hi)) * price_step(hi)
        }
    return dict(user.price_ranges[leaf_name])
