"""The paper reward (docs/contract.md#reward, ``shopsimulator-paper-reward-v2``); the scalar is ``r_strict``.

Title terms are lexical (Latin/number tokens plus Han bigrams): spaCy is never
consulted, so a score cannot depend on what happens to be installed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..contract import PURCHASE
from ..errors import DataError
from ..search.text import LATIN_TOKEN  # the docs/contract.md#search-tokeniser Latin/number token shape
from ..versions import REWARD_VERSION
from ._variant_price import PASS, resolve_variant_price
from .fuzzy import token_set_ratio

FUZZY_THRESHOLD = 85  # a match needs a ratio strictly above this
NO_DESIRED_TERMS_SCORE = 0.2
_CATEGORY_SEPARATOR = re.compile(r"\s*[›>/\\]\s*")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")


def _texts(value: Any) -> list[str]:
    """A field as a list of strings: None → [], a string → [it], an iterable → its items stringified."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(item) for item in value]
    return [str(value)]


def category_parts(category: object) -> set[str]:
    """The casefolded, non-empty parts of a category path (separators ``›``, ``>``, ``/``, ``\\``)."""
    if not category:
        return set()
    parts = (part.strip().casefold() for part in _CATEGORY_SEPARATOR.split(str(category)))
    return {part for part in parts if part}


def title_terms(title: object) -> list[str]:
    """Lexical title terms: Latin/number tokens of the casefolded text, then each Han run's 2-char windows."""
    text = str(title or "")
    terms = LATIN_TOKEN.findall(text.casefold())
    for run in _HAN_RUN.findall(text):
        if len(run) == 1:
            terms.append(run)
        else:
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
    return [term for term in terms if term.strip()]


def type_reward(
    purchased_category: object,
    goal_category: object,
    purchased_terms: Iterable[str],
    desired_terms: Iterable[str],
) -> tuple[float, bool, float]:
    """(r_type, category_match, title_score) per docs/contract.md#reward-type's 1 / 0.5 / 0.1 / 0 ladder."""
    category_match = len(category_parts(purchased_category) & category_parts(goal_category)) >= 2
    desired = set(desired_terms)
    title_score = len(set(purchased_terms) & desired) / len(desired) if desired else NO_DESIRED_TERMS_SCORE
    if category_match or title_score > 0.2:
        r_type = 1.0
    elif title_score == 0:
        r_type = 0.0
    elif title_score < 0.1:
        r_type = 0.1
    else:
        r_type = 0.5
    return r_type, category_match, title_score


def _searchable_text(product: Mapping[str, Any]) -> str:
    """Title, bullets and description, casefolded: the text an attribute may appear in verbatim."""
    bullets = product.get("BulletPoints")
    if bullets is None:
        bullets = product.get("small_description")
    return " ".join([
        str(product.get("Title") or product.get("title") or ""),
        " ".join(_texts(bullets)),
        str(product.get("Description") or product.get("full_description") or ""),
    ]).casefold()


def _purchased_attributes(product: Mapping[str, Any]) -> list[str]:
    attributes = product.get("Attributes")
    if attributes is None:
        attributes = product.get("attribute")
    return _texts(attributes)


def attribute_reward(product: Mapping[str, Any], goal_attributes: Sequence[str]) -> tuple[float, int]:
    """(r_att, num_attr_matches): fuzzy ratio > 85 with a product attribute, or a substring of the text."""
    wanted_list = [str(wanted) for wanted in goal_attributes]
    if not wanted_list:
        return 1.0, 0
    attributes = _purchased_attributes(product)
    searchable = _searchable_text(product)
    matches = 0
    for wanted in wanted_list:
        if wanted.casefold() in searchable or any(
            token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in attributes
        ):
            matches += 1
    return matches / len(wanted_list), matches


def required_option_values(goal_options: Any) -> list[str]:
    """The goal's option values: a dict's values, a collection's items, a non-empty scalar, or none."""
    if isinstance(goal_options, Mapping):
        return [str(value) for value in goal_options.values()]
    if isinstance(goal_options, (list, tuple, set, frozenset)):
        return [str(value) for value in goal_options]
    if goal_options is None or goal_options == "":
        return []
    return [str(goal_options)]


def option_reward(selected_values: Sequence[str], goal_options: Any) -> tuple[float, int]:
    """(r_option, num_option_matches): values only, fuzzy ratio > 85, no colour or synonym normalisation."""
    required = required_option_values(goal_options)
    if not required:
        return 1.0, 0
    selected = [str(value) for value in selected_values]
    matches = sum(
        1 for wanted in required if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in selected)
    )
    return matches / len(required), matches


def price_reward(price_upper: float | None, resolution: Mapping[str, Any]) -> float:
    """r_price: 1 without a budget; else 1 only for a verified, finite price within the budget."""
    if price_upper is None:
        return 1.0
    if resolution.get("status") != PASS:
        return 0.0
    price = resolution.get("price")
    if isinstance(price, bool) or not isinstance(price, (int, float)) or not math.isfinite(price):
        return 0.0
    return 1.0 if price <= price_upper else 0.0


GOAL_FIELDS = {"category": (str,), "name": (str,), "attributes": (list, tuple), "goal_options": (list, tuple, Mapping),
               "price_upper": (int, float, type(None))}


def check_goal(goal: object) -> None:
    """Refuse a goal missing a scored field: a goal of only ``asin`` used to score r_loose 0.5 silently."""
    if not isinstance(goal, Mapping):
        raise DataError(f"goal must be a mapping, got {type(goal).__name__}", code="invalid_goal")
    missing = [key for key in GOAL_FIELDS if key not in goal]
    if missing:
        raise DataError(f"goal lacks {missing}; a goal needs {list(GOAL_FIELDS)} (price_upper may be null)", code="invalid_goal")
    for key, kinds in GOAL_FIELDS.items():
        value = goal[key]
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise DataError(f"goal field {key!r} has type {type(value).__name__}", code="invalid_goal")


def check_selection(selected: object) -> None:
    """Refuse a selection that is not ``{axis: value}`` strings (a list of values used to score r_option 0)."""
    if not isinstance(selected, Mapping):
        raise DataError(
            f"selected_options must be a mapping {{axis: value}} of the chosen option per axis, not "
            f"{type(selected).__name__} ({selected!r:.80}); e.g. {{'颜色分类': '白色'}}", code="invalid_selection"
        )
    bad = [(axis, value) for axis, value in selected.items() if not isinstance(axis, str) or not isinstance(value, str)]
    if bad:
        raise DataError(f"selected_options maps option axes to chosen values, all strings; got {bad[:3]!r}", code="invalid_selection")


def score_purchase(
    product: Mapping[str, Any],
    goal: Mapping[str, Any],
    selected_options: Mapping[str, str],
    price_resolution: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full purchase ``reward_detail`` (docs/contract.md#reward-combination keys, in order) for an archive-format product and a goal.

    Without ``price_resolution`` the price is resolved from the product and the selection (docs/contract.md#variant-price).
    """
    check_goal(goal)
    check_selection(selected_options)
    if price_resolution is None:
        resolution = resolve_variant_price(product, selected_options)
    else:
        resolution = dict(price_resolution)
    title = product.get("Title") or product.get("title") or ""
    r_type, category_match, title_score = type_reward(
        product.get("category"), goal.get("category"), title_terms(title), title_terms(goal.get("name"))
    )
    goal_attributes = _texts(goal.get("attributes"))
    r_att, attr_matches = attribute_reward(product, goal_attributes)
    goal_options = goal.get("goal_options")
    selected_values = list(selected_options.values())
    r_option, option_matches = option_reward(selected_values, goal_options)
    price_upper = goal.get("price_upper")
    r_price = price_reward(price_upper, resolution)
    n_att = len(goal_attributes)
    n_opt = len(required_option_values(goal_options))
    r_loose = r_type * (attr_matches + option_matches + r_price) / (n_att + n_opt + 1)
    r_strict = r_type * r_att * r_option * r_price
    r_success = int(r_type == 1.0 and r_att == 1.0 and r_option == 1.0 and r_price == 1.0)
    return {
        "reward_version": REWARD_VERSION,
        "termination_reason": PURCHASE,
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
        "r_success": r_success,
        "target_asin_match": str(product.get("asin")) == str(goal.get("asin")),
        "price_verifiable": resolution.get("status") == PASS,
        "price_upper": price_upper,
        "price_resolution": resolution,
    }


def empty_reward_detail(termination_reason: str) -> dict[str, Any]:
    """The zero detail of every ending that is not a purchase (exactly the docs/contract.md#reward-combination keys)."""
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
