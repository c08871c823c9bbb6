"""Function tools per page (docs/contract.md#tools): golden JSON, gating and input checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl.env._observation import home_state, results_state, terminal_state
from shopsimrl.env.tools import tools_for_state
from shopsimrl.errors import DataError

GOLDEN = Path(__file__).parent / "golden"
PRODUCT_ACTIONS = ["back to search", "< prev", "颜色分类=白色", "尺码=m | l"]


def golden(name: str) -> list[dict]:
    return json.loads((GOLDEN / name).read_text("utf-8"))


def test_home_offers_only_search() -> None:
    tools = tools_for_state(home_state())
    assert tools == golden("tools_home.json")
    assert tools == [{
        "type": "function",
        "function": {
            "name": "search",
            "description": "使用关键词搜索商品。仅在当前页面提供此工具时调用。",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "minLength": 1, "description": "用于检索商品的简洁关键词。"}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }]


def test_product_page_offers_click_with_the_exact_enum() -> None:
    state = {"search_available": False, "actions": PRODUCT_ACTIONS}
    tools = tools_for_state(state)
    assert tools == golden("tools_product.json")
    assert json.dumps(tools, ensure_ascii=False) == json.dumps(golden("tools_product.json"), ensure_ascii=False)
    function = tools[0]["function"]
    assert function["name"] == "click"
    assert function["description"] == "点击当前页面的一个可用按钮、商品或规格选项。"
    assert function["parameters"] == {
        "type": "object",
        "properties": {"value": {"type": "string", "enum": PRODUCT_ACTIONS, "description": "必须逐字选择当前可点击值之一。"}},
        "required": ["value"],
        "additionalProperties": False,
    }
    assert function["parameters"]["properties"]["value"]["enum"] is not state["actions"]  # a copy


def test_search_then_click_when_both_are_offered() -> None:
    tools = tools_for_state({"search_available": True, "actions": ["back to search"]})
    assert [tool["function"]["name"] for tool in tools] == ["search", "click"]


def test_search_needs_exactly_true() -> None:
    assert tools_for_state({"search_available": 1, "actions": []}) == []
    assert tools_for_state({"search_available": "true", "actions": ["a"]})[0]["function"]["name"] == "click"


def test_results_page_click_enum_follows_the_state() -> None:
    state = results_state("q", "q", 1, 2, 21, [{"asin": "000000000001", "rank": 1}], ["back to search", "next >",
                                                                                      "000000000001"])
    tools = tools_for_state(state)
    assert [tool["function"]["name"] for tool in tools] == ["click"]
    assert tools[0]["function"]["parameters"]["properties"]["value"]["enum"] == ["back to search", "next >",
                                                                                 "000000000001"]


def test_terminal_page_has_no_tools() -> None:
    assert tools_for_state(terminal_state()) == []


@pytest.mark.parametrize(
    "state",
    [
        None,
        ["search"],
        {"search_available": True},
        {"search_available": True, "actions": None},
        {"search_available": False, "actions": ("a",)},
        {"search_available": False, "actions": "buy now"},
        {"search_available": False, "actions": ["buy now", ""]},
        {"search_available": False, "actions": ["buy now", 3]},
    ],
)
def test_bad_actions_raise_a_typed_error(state: object) -> None:
    with raises_kind(DataError, "observation"):
        tools_for_state(state)  # type: ignore[arg-type]
