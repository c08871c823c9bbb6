"""The paper reward (docs/contract.md#reward, acceptance cases 44–55) and its invariants."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.env._reward import (
    attribute_reward,
    category_parts,
    empty_reward_detail,
    option_reward,
    price_reward,
    required_option_values,
    score_purchase,
    title_terms,
    type_reward,
)
from shopsimrl.env._variant_price import resolve_variant_price

P = 1999.0
DETAIL_KEYS = [
    "reward_version", "termination_reason", "r_type", "category_match", "title_score", "num_attr_matches",
    "num_option_matches", "r_att", "r_option", "r_price", "r_loose", "r_strict", "r_success",
    "target_asin_match", "price_verifiable", "price_upper", "price_resolution",
]


def product(p: float = P, asin: str = "gold") -> dict[str, Any]:
    return {
        "asin": asin,
        "title": "智能热洗白色洗地机",
        "category": "家电›清洁电器›洗地机",
        "attribute": ["智能", "热洗"],
        "pricing": [p],
        "customization_options": {
            "颜色分类": [{"value": "白色", "price": p}, {"value": "黑色", "price": p + 100}],
            "尺码": [{"value": "标准版", "price": p}, {"value": "大号", "price": p}],
        },
    }


def goal(price_upper: float | None = 2100.0) -> dict[str, Any]:
    return {
        "asin": "gold",
        "name": "智能热洗白色洗地机",
        "category": "家电›清洁电器›洗地机",
        "attributes": ["智能", "热洗"],
        "goal_options": ["白色"],
        "price_upper": price_upper,
    }


def test_loose_strict_and_success_follow_paper_formula() -> None:  # acceptance case 44
    detail = score_purchase(product(), goal(), {"颜色分类": "白色"})
    assert list(detail) == DETAIL_KEYS
    assert {k: detail[k] for k in DETAIL_KEYS[:-1]} == {
        "reward_version": "shopsimulator-paper-reward-v2",
        "termination_reason": "purchase",
        "r_type": 1.0,
        "category_match": True,
        "title_score": 1.0,
        "num_attr_matches": 2,
        "num_option_matches": 1,
        "r_att": 1.0,
        "r_option": 1.0,
        "r_price": 1.0,
        "r_loose": 1.0,
        "r_strict": 1.0,
        "r_success": 1,
        "target_asin_match": True,
        "price_verifiable": True,
        "price_upper": 2100.0,
    }
    assert detail["price_resolution"] == {
        "status": "pass", "price": 1999.0, "version": "variant-price-paper-v2",
        "method": "selected_price_axis", "evidence": {"price_axis": "颜色分类"},
    }
    for absent in ("query_match", "reward_type", "weighted_score"):
        assert absent not in detail


def test_target_asin_is_diagnostic_not_a_success_gate() -> None:  # acceptance case 45
    detail = score_purchase(product(asin="alternative"), goal(), {"颜色分类": "白色"})
    assert detail["target_asin_match"] is False
    assert detail["r_success"] == 1 and detail["r_strict"] == 1.0


def test_gold_asin_does_not_override_wrong_option() -> None:  # acceptance cases 46–47
    detail = score_purchase(product(), goal(), {"颜色分类": "黑色"})
    assert detail["target_asin_match"] is True
    assert detail["r_option"] == 0.0 and detail["num_option_matches"] == 0
    assert detail["r_success"] == 0
    assert detail["r_strict"] == 0.0
    assert detail["r_price"] == 1.0  # 2099 ≤ 2100
    assert detail["r_loose"] == 0.75  # 1 × (2 + 0 + 1) / 4


def test_type_reward_has_complete_one_half_tenth_zero_ladder() -> None:  # acceptance case 48
    desired = [f"t{i}" for i in range(20)]
    assert type_reward("丙›丁", "甲›乙", ["t0"], desired) == (0.1, False, 0.05)
    assert type_reward("丙›丁", "甲›乙", ["t0", "t1"], desired) == (0.5, False, 0.1)
    assert type_reward("丙›丁", "甲›乙", [], desired) == (0.0, False, 0.0)
    assert type_reward("甲›乙", "甲›乙", [], desired) == (1.0, True, 0.0)
    assert type_reward("丙›丁", "甲›乙", desired[:4], desired)[0] == 0.5  # exactly 0.2 is not > 0.2
    assert type_reward("丙›丁", "甲›乙", desired[:5], desired)[0] == 1.0


def test_empty_desired_title_terms_preserve_original_neutral_score() -> None:  # acceptance case 49
    assert type_reward("丙›丁", "甲›乙", ["x"], []) == (0.5, False, 0.2)
    detail = score_purchase({**product(), "category": "丙›丁"}, {**goal(), "name": "", "category": "甲›乙"}, {})
    assert (detail["r_type"], detail["title_score"], detail["category_match"]) == (0.5, 0.2, False)


def test_option_matching_does_not_apply_webshop_color_normalization() -> None:  # acceptance case 50
    assert option_reward(["深海blue色"], ["天空blue款"]) == (0.0, 0)
    assert option_reward(["黑色 | 白色"], ["黑色/白色"]) == (1.0, 1)
    assert option_reward(["m"], ["M"]) == (1.0, 1)


def test_budget_failure_and_unverifiable_price_receive_zero_price_score() -> None:  # acceptance case 54
    over = score_purchase(product(p=2200.0), goal(), {"颜色分类": "白色"})
    assert over["r_price"] == 0.0 and over["price_verifiable"] is True and over["r_strict"] == 0.0
    unverifiable = score_purchase(product(), goal(), {})
    assert unverifiable["r_price"] == 0.0
    assert unverifiable["price_verifiable"] is False
    assert unverifiable["price_resolution"]["method"] == "price_axis_unselected"


def test_no_budget_does_not_require_or_invent_a_price() -> None:  # acceptance case 55
    detail = score_purchase(product(), goal(price_upper=None), {})
    assert detail["r_price"] == 1.0
    assert detail["price_verifiable"] is False
    assert detail["price_upper"] is None


def test_product_without_pricing_and_options_is_unverifiable() -> None:
    # Defect fixed (issue 3): no pricing means no listing price, not a verifiable 100.0.
    record = {"asin": "x", "title": "智能热洗白色洗地机", "category": "家电›清洁电器›洗地机", "attribute": ["智能", "热洗"]}
    detail = score_purchase(record, {**goal(price_upper=150.0), "goal_options": []}, {})
    assert detail["price_verifiable"] is False and detail["r_price"] == 0.0
    assert detail["price_resolution"]["method"] == "price_not_deterministic"


def test_explicit_price_resolution_is_used_as_given() -> None:
    stored = resolve_variant_price(product(), {"颜色分类": "白色"})
    detail = score_purchase(product(), goal(), {"颜色分类": "黑色"}, price_resolution=stored)
    assert detail["price_resolution"] == stored and detail["price_resolution"] is not stored
    assert detail["r_price"] == 1.0


def test_title_terms_are_lexical() -> None:
    assert title_terms("智能热洗白色洗地机") == ["智能", "能热", "热洗", "洗白", "白色", "色洗", "洗地", "地机"]
    assert title_terms("iPhone 15 Pro 黑 USB-C线") == ["iphone", "15", "pro", "usb-c", "黑", "线"]
    assert title_terms("") == [] and title_terms(None) == []


def test_category_parts() -> None:
    assert category_parts("电子产品 › 耳机") == {"电子产品", "耳机"}
    assert category_parts("A > b / C \\ d") == {"a", "b", "c", "d"}
    assert category_parts("家电››洗地机") == {"家电", "洗地机"}
    assert category_parts(None) == set()


def test_category_match_needs_two_shared_parts() -> None:
    assert type_reward("家电›冰箱", "家电›洗地机", [], ["x"])[1] is False
    assert type_reward("家电 > 冰箱", "家电›冰箱", [], ["x"])[1] is True


def test_attribute_reward_fuzzy_or_substring() -> None:
    record = {"title": "静音 小冰箱", "attribute": ["主动降噪", "XL码"], "full_description": "节能 一级能效",
              "small_description": ["宿舍必备"]}
    assert attribute_reward(record, []) == (1.0, 0)
    assert attribute_reward(record, ["xl"]) == (0.0, 0)  # ratio 80 is not > 85
    assert attribute_reward(record, ["xl码"]) == (1.0, 1)
    assert attribute_reward(record, ["静音", "节能", "宿舍", "降噪"]) == (0.75, 3)  # "降噪" scores 67
    bullets_as_string = {"title": "t", "attribute": [], "small_description": "宿舍必备"}
    assert attribute_reward(bullets_as_string, ["宿舍"]) == (1.0, 1)


def test_required_option_values_shapes() -> None:
    assert required_option_values({"颜色": "白色", "尺码": 42}) == ["白色", "42"]
    assert required_option_values(("白色",)) == ["白色"]
    assert required_option_values("白色") == ["白色"]
    assert required_option_values("") == [] and required_option_values(None) == []


def test_price_reward_rules() -> None:
    passing = {"status": "pass", "price": 10.0}
    assert price_reward(None, {"status": "unverifiable"}) == 1.0
    assert price_reward(10.0, passing) == 1.0
    assert price_reward(9.99, passing) == 0.0
    assert price_reward(10.0, {"status": "pass", "price": float("nan")}) == 0.0
    assert price_reward(10.0, {"status": "unverifiable", "price": 1.0}) == 0.0


def test_empty_reward_detail_has_exactly_the_zero_keys() -> None:  # acceptance case 79
    assert empty_reward_detail("action_limit") == {
        "reward_version": "shopsimulator-paper-reward-v2",
        "termination_reason": "action_limit",
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
    assert empty_reward_detail("generation_length")["termination_reason"] == "generation_length"


WORDS = ["智能", "热洗", "白色", "黑色", "洗地机", "静音", "大号", "m", "XL码"]


@settings(max_examples=150, deadline=None)
@given(
    title=st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
    category=st.sampled_from(["家电›清洁电器›洗地机", "家电›冰箱", "数码›耳机", ""]),
    attributes=st.lists(st.sampled_from(WORDS), max_size=3),
    goal_attributes=st.lists(st.sampled_from(WORDS), max_size=3),
    goal_options=st.lists(st.sampled_from(WORDS), max_size=2),
    selection=st.dictionaries(st.sampled_from(["颜色分类", "尺码", "规格"]), st.sampled_from(["白色", "黑色", "大号", "m"])),
    price_upper=st.one_of(st.none(), st.sampled_from([0.0, 1999.0, 2099.0, 5000.0])),
)
def test_reward_invariants(
    title: str, category: str, attributes: list[str], goal_attributes: list[str], goal_options: list[str],
    selection: dict[str, str], price_upper: float | None,
) -> None:
    record = {**product(), "title": title, "category": category, "attribute": attributes}
    target = {**goal(price_upper), "attributes": goal_attributes, "goal_options": goal_options}
    detail = score_purchase(record, target, selection)
    assert list(detail) == DETAIL_KEYS
    assert detail["r_strict"] == detail["r_type"] * detail["r_att"] * detail["r_option"] * detail["r_price"]
    all_one = all(detail[k] == 1.0 for k in ("r_type", "r_att", "r_option", "r_price"))
    assert detail["r_success"] == (1 if all_one else 0)
    assert 0.0 <= detail["r_loose"] <= 1.0
    assert 0.0 <= detail["r_strict"] <= detail["r_type"] <= 1.0
    assert detail["r_type"] in (0.0, 0.1, 0.5, 1.0)
    assert detail["price_verifiable"] == (detail["price_resolution"]["status"] == "pass")


@pytest.mark.parametrize(
    ("bad_goal", "message"),
    [
        ({"asin": "gold"}, "goal lacks ['category', 'name', 'attributes', 'goal_options', 'price_upper']"),
        ({**goal(), "attributes": "智能"}, "goal field 'attributes' has type str"),
        ({**goal(), "price_upper": "2100"}, "goal field 'price_upper' has type str"),
        (["gold"], "goal must be a mapping"),
    ],
)
def test_a_goal_missing_scored_fields_is_a_typed_error(bad_goal, message) -> None:
    from shopsimrl.errors import DataError

    with raises_kind(DataError, "invalid_goal", match=re.escape(message)):
        score_purchase(product(), bad_goal, {"颜色分类": "白色"})


@pytest.mark.parametrize("selection", [["白色"], ("白色",), "白色", None, {"颜色分类": 1}, {1: "白色"}])
def test_a_malformed_selection_is_a_typed_error_not_a_silent_zero(selection) -> None:  # issue 28 item 3
    from shopsimrl.errors import DataError

    with raises_kind(DataError, "invalid_selection", match="selected_options"):
        score_purchase(product(), goal(), selection)
