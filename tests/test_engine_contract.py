"""Golden and property tests of the engine's pure parts (docs/contract.md#action-strings, #observation, #reward, #variant-price; acceptance cases 23-33, 44-55, 62-65)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.contract import extract_action, parse_action
from shopsimrl.env._observation import (
    home_state,
    product_state,
    render_observation,
    results_state,
    terminal_state,
)
from shopsimrl.env._reward import option_reward, score_purchase, type_reward
from shopsimrl.env._variant_price import price_display, resolve_variant_price
from shopsimrl.env.fuzzy import token_set_ratio
from shopsimrl.env.tools import tools_for_state
from shopsimrl.errors import DataError

GOLDEN = Path(__file__).parent / "golden"


def _golden(name: str) -> str:
    return (GOLDEN / name).read_text("utf-8")


def _fb(valid, reason, message):
    return {"action": "x", "valid": valid, "reason": reason, "message": message}


def test_worked_examples_render_byte_exact():
    assert render_observation(home_state()) == _golden("home.txt")
    results = results_state(
        search_text="降噪 耳机", normalized_search_text="降噪 耳机", page=1, total_pages=1, total_results=1,
        products=[{"asin": "000000000001", "title": "测试降噪耳机", "brand": "测试品牌", "category": "耳机",
                   "price": [299], "key_attributes": ["主动降噪", "蓝牙"], "rank": 1}],
        actions=["000000000001"],
    )
    assert render_observation(results) == _golden("results.txt")
    product = product_state(
        product_summary={"asin": "000000000002", "title": "测试商品", "brand": "", "category": "", "price": None,
                         "key_attributes": []},
        selected_options={"颜色分类": "黑色"}, available_options={"颜色分类": ["黑色", "白色"], "尺码": ["M", "L"]},
        missing_option_axes=["尺码"], options_complete=False, invalid_selected_options=[], selected_price=None,
        actions=["颜色分类=白色", "尺码=M", "尺码=L"],
        last_action=_fb(False, "incomplete_options", "购买前还需选择规格轴：尺码"),
    )
    assert render_observation(product) == _golden("product.txt")
    assert render_observation(terminal_state(_fb(True, "executed", "购买已执行"))) == _golden("terminal.txt")
    assert "normalized_search_text" not in render_observation(results)


def test_search_label_is_filtered_and_state_has_no_goal():
    state = results_state(search_text="商品", normalized_search_text="商品", page=2, total_pages=2, total_results=40,
                          products=[{"asin": f"{i:012d}", "title": f"商品 {i}", "rank": i} for i in range(21, 41)],
                          actions=["< prev", *(f"{i:012d}" for i in range(21, 41))])
    assert (state["rank_start"], state["rank_end"]) == (21, 40) and "query" not in state
    assert home_state()["actions"] == [] and "last_action" not in home_state()
    assert {"goal", "reward"}.isdisjoint(state)


@pytest.mark.parametrize("bad", [
    {"observation_version": "v6", "page_type": "search_home"},
    {**home_state(), "reward": 1},
    {**home_state(), "page_type": "checkout"},
    {**results_state(search_text="a", normalized_search_text="a", page=1, total_pages=1, total_results=1,
                     products=[{"asin": "000000000001", "rank": 1}], actions=["000000000002"])},
])
def test_renderer_rejects_bad_states(bad):
    with raises_kind(DataError, "observation"):
        render_observation(bad)


def test_action_extraction_and_parsing():
    assert extract_action("Action: search[乳胶枕]") == "search[乳胶枕]"
    assert extract_action("Thought: 先搜索。\n  Action : click[buy now]  ") == "click[buy now]"
    multi = "Action: search[鞋]\nAction: click[buy now]"
    assert extract_action(multi) == multi
    assert parse_action(multi).error_code == "multiple_actions_not_allowed"
    assert parse_action("click[黑色], click[大号]").error_code == "multiple_actions_not_allowed"
    assert parse_action("click[黑色] trailing").error_code == "invalid_format"
    assert parse_action("click[ a[b] ]").argument == " a[b] "
    assert parse_action(3).error_message == "动作必须是字符串"
    assert parse_action("  ").error_message == "动作不能为空"
    assert parse_action("[x]").error_code == "invalid_format"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=30), st.sampled_from(["search", "click"]))
def test_canonical_actions_round_trip(argument, name):
    parsed = parse_action(f"{name}[{argument}]")
    if parsed.error_code is None:
        assert (parsed.name, parsed.argument) == (name, argument)
    else:  # only chained actions inside the argument are refused
        assert parsed.error_code == "multiple_actions_not_allowed"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parser_never_raises(text):
    parsed = parse_action(text)
    assert (parsed.error_code is None) == (parsed.name is not None)


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("黑色 | 白色", "黑色/白色", 100), ("m", "M", 100), ("大号 加厚", "加厚", 100), ("黑色", "白色", 50),
    ("深海blue色", "天空blue款", 57), ("主动降噪", "降噪", 67), ("xl", "XL码", 80),
])
def test_fuzzy_ratio_examples(a, b, expected):
    assert token_set_ratio(a, b) == expected


P = 1999.0
PRODUCT = {
    "asin": "gold", "title": "智能热洗白色洗地机", "category": "家电›清洁电器›洗地机", "attribute": ["智能", "热洗"],
    "pricing": [P], "customization_options": {
        "颜色分类": [{"value": "白色", "price": P}, {"value": "黑色", "price": P + 100}],
        "尺码": [{"value": "标准版", "price": P}, {"value": "大号", "price": P}],
    },
}
GOAL = {"asin": "gold", "name": "智能热洗白色洗地机", "category": "家电›清洁电器›洗地机", "attributes": ["智能", "热洗"],
        "goal_options": ["白色"], "price_upper": 2100.0}


def test_paper_formula_and_diagnostic_asin():
    detail = score_purchase(PRODUCT, GOAL, {"颜色分类": "白色"})
    assert (detail["r_loose"], detail["r_strict"], detail["r_success"]) == (1.0, 1.0, 1)
    assert {"query_match", "reward_type", "weighted_score"}.isdisjoint(detail)
    assert score_purchase({**PRODUCT, "asin": "alternative"}, GOAL, {"颜色分类": "白色"})["r_success"] == 1
    wrong = score_purchase(PRODUCT, GOAL, {"颜色分类": "黑色"})
    assert wrong["target_asin_match"] and wrong["r_option"] == 0.0 and wrong["r_strict"] == 0.0
    assert wrong["r_loose"] == 0.75


def test_type_ladder_and_neutral_score():
    desired = [f"t{i}" for i in range(20)]
    assert type_reward("丙›丁", "甲›乙", ["t0"], desired)[0] == 0.1
    assert type_reward("丙›丁", "甲›乙", ["t0", "t1"], desired)[0] == 0.5
    assert type_reward("丙›丁", "甲›乙", [], desired)[0] == 0.0
    assert type_reward("甲›乙", "甲›乙", [], desired)[0] == 1.0
    assert type_reward("丙›丁", "甲›乙", [], [])[:3] == (0.5, False, 0.2)
    assert option_reward(["深海blue色"], ["天空blue款"]) == (0.0, 0)


def test_variant_price_anchors():
    assert resolve_variant_price(PRODUCT, {"颜色分类": "白色"})["price"] == 1999.0
    assert resolve_variant_price(PRODUCT, {})["status"] == "unverifiable"
    unselected = resolve_variant_price(PRODUCT, {"color": "白色"})
    assert unselected["method"] == "price_axis_unselected" and unselected["evidence"] == {"price_axis": "颜色分类"}
    two = {**PRODUCT, "customization_options": {**PRODUCT["customization_options"], "尺码": [
        {"value": "标准版", "price": P}, {"value": "大号", "price": 2299.0}]}}
    assert resolve_variant_price(two, {})["method"] == "multiple_price_affecting_axes"
    assert score_purchase({**PRODUCT, "customization_options": {"颜色分类": [{"value": "白色", "price": 2200.0},
                          {"value": "黑色", "price": 2300.0}]}}, GOAL, {"颜色分类": "白色"})["r_price"] == 0.0
    unverifiable = score_purchase(PRODUCT, GOAL, {})
    assert unverifiable["r_price"] == 0.0 and unverifiable["price_verifiable"] is False
    free = score_purchase(PRODUCT, {**GOAL, "price_upper": None}, {})
    assert free["r_price"] == 1.0 and free["price_verifiable"] is False


def test_missing_pricing_is_not_invented():
    bare = {"asin": "x", "customization_options": {}}
    assert resolve_variant_price(bare, {})["status"] == "unverifiable"
    assert resolve_variant_price({**bare, "pricing": [59]}, {})["price"] == 59.0
    assert price_display([199]) == "199" and price_display([29.9, 59.0, 70]) == "29.9 to 59.0"
    assert price_display(None) is None


def test_tools_schema():
    search_only = tools_for_state(home_state())
    assert search_only == [{"type": "function", "function": {
        "name": "search", "description": "使用关键词搜索商品。仅在当前页面提供此工具时调用。",
        "parameters": {"type": "object", "properties": {"query": {
            "type": "string", "minLength": 1, "description": "用于检索商品的简洁关键词。"}},
            "required": ["query"], "additionalProperties": False}}}]
    click = tools_for_state({"search_available": False, "actions": ["back to search", "buy now"]})
    assert [t["function"]["name"] for t in click] == ["click"]
    assert click[0]["function"]["parameters"]["properties"]["value"]["enum"] == ["back to search", "buy now"]
    with raises_kind(DataError, "observation"):
        tools_for_state({"search_available": False, "actions": [""]})
