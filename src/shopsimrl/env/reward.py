"""The paper reward (env_spec §6, ``shopsimulator-paper-reward-v2``); the scalar is ``r_strict``.

Title terms are lexical (Latin/number tokens plus Han bigrams): spaCy is never consulted, so the score
does not depend on what happens to be installed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..search.text import LATIN_TOKEN
from ..versions import REWARD_VERSION
from .fuzzy import token_set_ratio
from .variant_price import resolve_variant_price

_CATEGORY_SEPARATORS = re.compile(r"\s*[›>/\\]\s*")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
FUZZY_THRESHOLD = 85


def category_parts(category: object) -> set[str]:
    return {part.strip().casefold() for part in _CATEGORY_SEPARATORS.split(str(category or "")) if part.strip()}


def title_terms(title: object) -> list[str]:
    text = str(title or "")
    terms = LATIN_TOKEN.findall(text.casefold())
    for run in _HAN_RUN.findall(text):
        terms.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return [term for term in terms if term.strip()]


def type_reward(
    purchased_category: object, goal_category: object, purchased_terms: Iterable[str], desired_terms: Iterable[str]
) -> tuple[float, bool, float]:
    """(r_type, category_match, title_score)."""
    category_match = len(category_parts(purchased_category) & category_parts(goal_category)) >= 2
    desired = set(desired_terms)
    title_score = len(set(purchased_terms) & desired) / len(desired) if desired else 0.2
    if category_match or title_score > 0.2:
        r_type = 1.0
    elif title_score == 0:
        r_type = 0.0
    elif title_score < 0.1:
        r_type = 0.1
    else:
        r_type = 0.5
    return r_type, category_match, title_score


def _text_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value]


def attribute_reward(product: Mapping[str, Any], goal_attributes: Sequence[str]) -> tuple[float, int]:
    if not goal_attributes:
        return 1.0, 0
    attributes = _text_list(product.get("Attributes", product.get("attribute")))
    bullets = product.get("BulletPoints", product.get("small_description"))
    searchable = " ".join([
        str(product.get("Title") or product.get("title") or ""),
        " ".join(_text_list(bullets)),
        str(product.get("Description") or product.get("full_description") or ""),
    ]).casefold()
    matches = sum(
        1
        for wanted in goal_attributes
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in attributes)
        or str(wanted).casefold() in searchable
    )
    return matches / len(goal_attributes), matches


def required_option_values(goal_options: Any) -> list[str]:
    if isinstance(goal_options, Mapping):
        return [str(v) for v in goal_options.values()]
    if isinstance(goal_options, (list, tuple, set)):
        return [str(v) for v in goal_options]
    if goal_options is None or goal_options == "":
        return []
    return [str(goal_options)]


def option_reward(selected_values: Sequence[str], goal_options: Any) -> tuple[float, int]:
    required = required_option_values(goal_options)
    if not required:
        return 1.0, 0
    matches = sum(
        1 for wanted in required if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in selected_values)
    )
    return matches / len(required), matches


def price_reward(price_upper: float | None, resolution: Mapping[str, Any]) -> float:
    if price_upper is None:
        return 1.0
    if resolution.get("status") != "pass":
        return 0.0
    price = resolution.get("price")
    return 1.0 if isinstance(price, (int, float)) and math.isfinite(price) and price <= price_upper else 0.0


def score_purchase(
    product: Mapping[str, Any],
    goal: Mapping[str, Any],
    selected_options: Mapping[str, str],
    price_resolution: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full purchase ``reward_detail`` for an archive-format product, a goal and the selected options."""
    resolution = dict(price_resolution) if price_resolution is not None else resolve_variant_price(product, selected_options)
    title = product.get("Title") or product.get("title") or ""
    r_type, category_match, title_score = type_reward(
        product.get("category"), goal.get("category"), title_terms(title), title_terms(goal.get("name"))
    )
    goal_attributes = list(goal.get("attributes") or [])
    r_att, attr_matches = attribute_reward(product, goal_attributes)
    r_option, option_matches = option_reward([str(v) for v in selected_options.values()], goal.get("goal_options"))
    price_upper = goal.get("price_upper")
    r_price = price_reward(price_upper, resolution)
    n_att = len(goal_attributes)
    n_opt = len(required_option_values(goal.get("goal_options")))
    r_loose = r_type * (attr_matches + option_matches + r_price) / (n_att + n_opt + 1)
    r_strict = r_type * r_att * r_option * r_price
    success = int(r_type == 1.0 and r_att == 1.0 and r_option == 1.0 and r_price == 1.0)
    return {
        "reward_version": REWARD_VERSION,
        "termination_reason": "purchase",
        "r_type": r_type,
        "category_match": category_match,
        "title_score": title_score,
        "num_attr_matches": attr_matches,
        "num_option_matches": option_matches,
        "r_att": r_att,
        "r_option": r_option,
        "r_price": r_price,
        "r_loose": r_loose,
        "r_strict": r_strict,
        "r_success": success,
        "target_asin_match": str(product.get("asin")) == str(goal.get("asin")),
        "price_verifiable": resolution.get("status") == "pass",
        "price_upper": price_upper,
        "price_resolution": resolution,
    }


def empty_reward_detail(termination_reason: str) -> dict[str, Any]:
    """The zero detail of every ending that is not a purchase."""
    return {
        "reward_version": REWARD_VERSION,
        "termination_reason": termination_reason,
        "r_loose": 0.0,
        "r_strict": 0.0,
        "r_success": 0,
        "r_type": 0.0,
        "r_att": 0.0,
        "r_option": 0.0,
        "r_price": 0.0,
        "target_asin_match": False,
        "price_verifiable": False,
    }
