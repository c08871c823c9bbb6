"""observation_state builders and the v7 text renderer (docs/contract.md#observation, acceptance cases 23–33), golden bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.env._actions import feedback
from shopsimrl.env._observation import (
    check_observation_state,
    home_state,
    is_product_id,
    product_state,
    product_summary,
    render_observation,
    results_state,
    terminal_state,
)
from shopsimrl.errors import DataError

GOLDEN = Path(__file__).parent / "golden"
COMMON_KEYS = ["observation_version", "page_type", "search_available", "actions"]


def golden(name: str) -> str:
    return (GOLDEN / name).read_bytes().decode("utf-8")


def results_example() -> dict[str, Any]:
    item = {
        "asin": "000000000001", "title": "测试降噪耳机", "brand": "测试品牌", "category": "耳机",
        "price": [299], "key_attributes": ["主动降噪", "蓝牙"], "rank": 1,
    }
    return results_state("降噪 耳机", "降噪 耳机", 1, 1, 1, [item], ["000000000001"])


def product_example() -> dict[str, Any]:
    summary = {"asin": "000000000002", "title": "测试商品", "brand": "", "category": "", "price": None,
               "key_attributes": []}
    return product_state(
        summary,
        {"颜色分类": "黑色"},
        {"颜色分类": ["黑色", "白色"], "尺码": ["M", "L"]},
        ["尺码"],
        False,
        [],
        None,
        ["颜色分类=白色", "尺码=M", "尺码=L"],
        feedback("click[buy now]", False, "incomplete_options", "购买前还需选择规格轴：尺码", missing_option_axes=["尺码"]),
    )


# ---------------------------------------------------------------- golden worked examples (docs/contract.md#observation-text)


def test_home_golden() -> None:
    assert render_observation(home_state()).encode() == (GOLDEN / "home.txt").read_bytes()


def test_results_golden() -> None:  # acceptance case 31
    text = render_observation(results_example())
    assert text.encode() == (GOLDEN / "results.txt").read_bytes()
    assert "搜索词：降噪 耳机" in text and "1. 测试降噪耳机" in text and "ASIN：000000000001" in text
    assert "可点击元素：\n- 000000000001" in text
    assert "click[000000000001]" not in text and "normalized_search_text" not in text


def test_product_golden() -> None:  # acceptance case 32
    text = render_observation(product_example())
    assert text.encode() == (GOLDEN / "product.txt").read_bytes()
    for fragment in ("颜色分类：已选择 黑色", "尺码：尚未选择", "仍需选择：尺码", "上次交互结果：", "结果：无效",
                     "可点击元素：", "- 尺码=M"):
        assert fragment in text
    assert "click[" not in text


def test_terminal_golden() -> None:
    text = render_observation(terminal_state(feedback("click[buy now]", True, "executed", "购买已执行")))
    assert text.encode() == (GOLDEN / "terminal.txt").read_bytes()


def test_golden_files_end_with_exactly_one_newline() -> None:
    for path in GOLDEN.glob("*.txt"):
        data = path.read_bytes()
        assert data.endswith(b"\n") and not data.endswith(b"\n\n"), path.name


def test_search_home_renderer_exposes_search_without_fake_click() -> None:  # acceptance case 30
    text = render_observation(home_state())
    assert text.startswith("页面：搜索首页")
    assert "页面能力：\n- 支持商品搜索" in text
    for forbidden in ("search[", "click[", "[SHOPPING_OBSERVATION", "[SEP]", "shopping-observation-v7"):
        assert forbidden not in text


# ---------------------------------------------------------------- builders (docs/contract.md#observation-state)


def test_builder_has_no_goal_parameter_or_hidden_answer() -> None:  # acceptance case 25
    state = home_state()
    assert list(state) == COMMON_KEYS
    assert state == {"observation_version": "shopping-observation-v7", "page_type": "search_home",
                     "search_available": True, "actions": []}
    assert "last_action" not in state and "goal" not in state and "reward" not in state


def test_search_label_is_never_an_action() -> None:
    state = results_state("x", "x", 1, 1, 1, [{"asin": "1", "rank": 1}], ["back to search", "Search", "search", "1"])
    assert state["actions"] == ["back to search", "1"]


def test_last_action_present_after_a_step() -> None:
    last = feedback("search[x]", True, "executed", "搜索已执行")
    for state in (home_state(last), terminal_state(last)):
        assert list(state) == [*COMMON_KEYS, "last_action"]
        assert state["last_action"] is last
    assert terminal_state() == {"observation_version": "shopping-observation-v7", "page_type": "terminal",
                                "search_available": False, "actions": []}


def test_search_page_preserves_all_twenty_products_and_ranks() -> None:  # acceptance case 24
    records = [{"asin": f"{i:012d}", "title": f"商品 {i}", "category": "测试", "pricing": [i], "shop_name": "店"}
               for i in range(1, 41)]
    page = [product_summary(record, rank=i) for i, record in enumerate(records[20:], start=21)]
    actions = ["< prev", *[record["asin"] for record in records[20:]]]
    state = results_state("商品", "商品", 2, 2, 40, page, actions)
    assert list(state) == [*COMMON_KEYS, "search_text", "normalized_search_text", "page", "total_pages",
                           "total_results", "rank_start", "rank_end", "products"]
    assert len(state["products"]) == 20
    assert (state["search_text"], state["normalized_search_text"]) == ("商品", "商品")
    assert "query" not in state
    assert (state["rank_start"], state["rank_end"]) == (21, 40)
    assert {p["asin"] for p in state["products"]} == set(actions) - {"< prev"}
    text = render_observation(state)
    assert "结果：第 2/2 页，共 40 项，当前显示排名 21-40" in text
    assert "21. 商品 21\n   ASIN：000000000021\n   价格：21\n   品牌：店\n   类别：测试\n22. 商品 22" in text
    assert "- < prev\n- 000000000021" in text


def test_empty_results_page() -> None:
    state = results_state("无结果", "无结果", 1, 1, 0, [], ["back to search"])
    assert (state["rank_start"], state["rank_end"]) == (0, 0)
    assert render_observation(state) == (
        "页面：搜索结果\n搜索词：无结果\n结果：第 1/1 页，共 0 项，当前显示排名 0-0\n\n商品列表：\n（本页没有商品）\n\n"
        "可点击元素：\n- back to search\n"
    )


def test_product_state_keys_and_optional_fields() -> None:  # acceptance case 27 shape
    summary = product_summary({"asin": "1", "title": "t", "shop_name": "s", "category": "c", "pricing": [1, 2],
                               "attribute": ["a"]}, rank=3)
    last = feedback("click[颜色分类=黑色]", True, "executed", "点击已执行")
    state = product_state(summary, {"颜色分类": "黑色"}, {"颜色分类": ["黑色", "白色"], "尺码": ["m", "l"]}, ["尺码"],
                          False, [], None, ["back to search", "< prev"], last)
    assert list(state) == [*COMMON_KEYS, "last_action", "product", "selected_options", "available_options",
                           "missing_option_axes", "options_complete"]
    assert "rank" not in state["product"] and summary["rank"] == 3
    assert state["selected_options"] == {"颜色分类": "黑色"} and state["missing_option_axes"] == ["尺码"]
    assert state["options_complete"] is False and state["last_action"]["reason"] == "executed"
    invalid = [{"axis": "颜色", "value": "红", "reason": "unknown_axis"}]
    full = product_state(summary, {}, {}, [], False, invalid, 19.9, ["back to search"])
    assert full["invalid_selected_options"] == invalid and full["selected_price"] == 19.9
    assert "last_action" not in full


def test_available_options_are_capped_at_one_hundred_values() -> None:
    values = [str(i) for i in range(150)]
    state = product_state(product_summary({"asin": "1"}), {}, {"规格": values, "色": ["a"]}, ["规格", "色"], False,
                          [], None, [])
    assert state["available_options"] == {"规格": values[:100], "色": ["a"]}
    small = {"色": ["a"]}
    assert product_state(product_summary({"asin": "1"}), {}, small, [], True, [], None, [])["available_options"] is small


def test_product_summary_fields() -> None:
    record = {"asin": 747848614498, "title": "", "Title": "洗地机", "brand": "品牌", "shop_name": "旗舰店",
              "category": None, "pricing": [1999.0, 2599.0, 1.0],
              "attribute": ["a", " ", "", 3, *[f"x{i}" for i in range(12)]]}
    assert product_summary(record) == {
        "asin": "747848614498", "title": "洗地机", "brand": "旗舰店", "category": "",
        "price": "1999.0 to 2599.0", "key_attributes": ["a", "3", "x0", "x1", "x2", "x3", "x4", "x5"],
    }
    assert product_summary({"asin": "1", "brand": "品牌"})["brand"] == "品牌"  # brand only without shop_name
    assert product_summary({"asin": "1", "Price": "100.0", "pricing": [5]})["price"] == "100.0"
    assert product_summary({"asin": "1", "Attributes": ["k"]})["key_attributes"] == ["k"]
    assert product_summary({"asin": "1"}, rank=7) == {"asin": "1", "title": "", "brand": "", "category": "",
                                                      "price": None, "key_attributes": [], "rank": 7}


def test_product_page_complete_price_and_no_options() -> None:
    summary = product_summary({"asin": "000000000009", "title": "单品", "shop_name": "店", "category": "a›b",
                               "pricing": [29.9, 59.0], "attribute": ["一", "二"]})
    state = product_state(summary, {}, {}, [], True, [], 39.5, ["back to search", "< prev", "buy now"],
                          feedback("click[000000000009]", True, "executed", "点击已执行"))
    assert render_observation(state) == (
        "页面：商品详情\n商品：\n- 标题：单品\n- ASIN：000000000009\n- 价格：39.5\n- 品牌：店\n- 类别：a›b\n"
        "- 关键属性：一；二\n\n规格选择：\n- 此商品没有规格选项\n规格状态：已选择全部规格，可以购买\n\n"
        "上次交互结果：\n- 结果：成功\n- 说明：点击已执行\n\n可点击元素：\n- back to search\n- < prev\n- buy now\n"
    )
    without_price = product_state(summary, {}, {}, [], True, [], None, ["buy now"])
    assert "- 价格：29.9 to 59.0\n" in render_observation(without_price)


def test_invalid_selected_options_list_is_never_printed() -> None:  # docs/contract.md#deviations item 8, kept for byte compatibility
    base = product_example()
    with_invalid = {**base, "invalid_selected_options": [{"axis": "x", "value": "y", "reason": "unknown_axis"}]}
    assert render_observation(with_invalid) == render_observation(base)
    assert "无效的历史规格选择" not in render_observation(with_invalid)


def test_information_subpage_layout() -> None:
    state = {**product_example(), "page_type": "information_subpage", "subpage": "attributes",
             "content": ["智能", "热洗"], "actions": ["back to search", "< prev"]}
    del state["last_action"]
    text = render_observation(state)
    assert text.startswith("页面：商品属性页\n商品：\n")
    assert '仍需选择：尺码\n\n子页面：attributes\n内容：["智能", "热洗"]\n\n可点击元素：\n- back to search\n- < prev\n' in text
    assert "子页面：attributes\n内容：未提供" in render_observation({**state, "subpage": "", "content": ""})


def test_last_action_block_variants() -> None:
    silent = {"action": "x", "valid": True, "reason": "executed", "message": ""}
    assert render_observation(home_state(silent)) == "页面：搜索首页\n\n上次交互结果：\n- 结果：成功\n\n页面能力：\n- 支持商品搜索\n"
    bad = feedback("click[Buy Now]", False, "unavailable_action", "当前页面不存在可点击项：Buy Now")
    assert "- 结果：无效\n- 说明：当前页面不存在可点击项：Buy Now\n- 原因代码：unavailable_action\n" in render_observation(
        terminal_state(bad)
    )


def test_values_are_single_line_and_untitled_fallbacks() -> None:
    item = {"asin": "A1", "title": "  多  空格\n标题 ", "brand": "\t", "category": None, "price": {"b": 1, "a": "二"},
            "key_attributes": [" x  y ", "  "], "rank": 1}
    text = render_observation(results_state("", "", 1, 1, 1, [item], ["a1"]))
    assert "搜索词：未提供\n" in text
    assert "1. 多 空格 标题\n   ASIN：A1\n   价格：{\"a\": \"二\", \"b\": 1}\n   品牌：未提供\n   类别：未提供\n   关键属性：x y\n" in text
    assert "1. 未命名商品\n" in render_observation(results_state("q", "q", 1, 1, 1, [{**item, "title": ""}], ["a1"]))


def test_search_and_click_both_offered() -> None:
    state = {**home_state(), "actions": ["back to search"]}
    assert render_observation(state).endswith("页面能力：\n- 支持商品搜索\n\n可点击元素：\n- back to search\n")


# ---------------------------------------------------------------- checks (docs/contract.md#observation-checks)


def test_renderer_rejects_hidden_answer_fields() -> None:  # acceptance case 33
    for key in ("goal", "reward", "reward_detail", "target_asin", "answer"):
        with raises_kind(DataError, "observation"):
            render_observation({**home_state(), key: 1})
    leaking = results_example()
    leaking["products"] = [{**leaking["products"][0], "target_asin": "000000000001"}]
    with raises_kind(DataError, "observation"):
        render_observation(leaking)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: [1, 2], "mapping"),
        (lambda s: {**s, "observation_version": "shopping-observation-v6"}, "unsupported observation_state version"),
        (lambda s: {k: v for k, v in s.items() if k != "observation_version"}, "unsupported observation_state version"),
        (lambda s: {**s, "page_type": "done"}, "page_type"),
        (lambda s: {**s, "page_type": None}, "page_type"),
        (lambda s: {**s, "products": tuple(s["products"])}, "products must be a list"),
        (lambda s: {**s, "products": ["000000000001"]}, "not a mapping"),
        (lambda s: {**s, "products": [{**s["products"][0], "asin": "back to search"}]}, "invalid product ASIN"),
        (lambda s: {**s, "products": [{**s["products"][0], "asin": "1" * 21}]}, "invalid product ASIN"),
        (lambda s: {**s, "actions": ["000000000002"]}, "differ from environment-actionable"),
        (lambda s: {**s, "actions": []}, "differ from environment-actionable"),
        (lambda s: {**s, "actions": "000000000001"}, "actions must be a list"),
        (lambda s: {**s, "actions": [1]}, "actions must be a list"),
        (
            lambda s: {**s, "products": [{"asin": f"{i}", "rank": i} for i in range(1, 22)],
                       "actions": [f"{i}" for i in range(1, 22)]},
            "exceeds the frozen page size of 20",
        ),
    ],
)
def test_results_checks(mutate: Any, message: str) -> None:
    with raises_kind(DataError, "observation", match=message):
        render_observation(mutate(results_example()))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: {**s, "product": None}, "product must be a mapping"),
        (lambda s: {**s, "product": {**s["product"], "asin": "buy now"}}, "invalid product ASIN"),
        (lambda s: {**s, "product": {**s["product"], "asin": None}}, "invalid product ASIN"),
        (lambda s: {**s, "selected_options": [("颜色分类", "黑色")]}, "selected_options must be a mapping"),
        (lambda s: {**s, "available_options": None}, "available_options must be a mapping"),
        (lambda s: {**s, "page_type": "information_subpage", "available_options": []}, "available_options"),
    ],
)
def test_product_checks(mutate: Any, message: str) -> None:
    with raises_kind(DataError, "observation", match=message):
        render_observation(mutate(product_example()))


def test_check_returns_the_page_type() -> None:
    assert check_observation_state(results_example()) == "search_results"
    assert check_observation_state(product_example()) == "product_detail"


def test_asin_comparison_ignores_case_and_non_asin_actions() -> None:
    item = {**results_example()["products"][0], "asin": "B0ABC123"}
    state = results_state("q", "q", 1, 2, 21, [item], ["back to search", "next >", "b0abc123"])
    assert "ASIN：B0ABC123" in render_observation(state)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("000000000001", True), ("747848614498", True), ("b0abc123", True), ("A", True), ("1" * 20, True),
        ("1" * 21, False), ("", False), ("back to search", False), ("< prev", False), ("next >", False),
        ("buy now", False), ("attributes", False), ("search", False), ("颜色分类=黑色", False), ("１２", False),
        ("12 ", False), (12, False), (None, False),
    ],
)
def test_is_product_id(value: object, expected: bool) -> None:
    assert is_product_id(value) is expected


@settings(max_examples=100, deadline=None)
@given(
    titles=st.lists(st.text(max_size=8), max_size=20),
    message=st.text(max_size=10),
    valid=st.booleans(),
)
def test_rendered_text_is_deterministic_and_well_formed(titles: list[str], message: str, valid: bool) -> None:
    products = [{"asin": f"{i:012d}", "title": title, "brand": title, "category": title, "price": title,
                 "key_attributes": [title], "rank": i} for i, title in enumerate(titles, start=1)]
    last = {"action": "x", "valid": valid, "reason": "executed" if valid else "invalid_format", "message": message}
    state = results_state("q", "q", 1, 1, len(products), products, [p["asin"] for p in products], last)
    text = render_observation(state)
    assert text == render_observation(json.loads(json.dumps(state)))
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert len(text.splitlines()) >= 5 + 5 * len(products)
