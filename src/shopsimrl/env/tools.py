"""OpenAI function tools for a page (runtime_spec §2): ``search`` when offered, ``click`` over the page's enum."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ObservationError

SEARCH_DESCRIPTION = "使用关键词搜索商品。仅在当前页面提供此工具时调用。"
CLICK_DESCRIPTION = "点击当前页面的一个可用按钮、商品或规格选项。"


def tools_for_state(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    actions = state.get("actions", [])
    if not isinstance(actions, list) or not all(isinstance(a, str) and a for a in actions):
        raise ObservationError("observation_state.actions must be a list of non-empty strings")
    tools: list[dict[str, Any]] = []
    if state.get("search_available") is True:
        tools.append({"type": "function", "function": {
            "name": "search",
            "description": SEARCH_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "minLength": 1, "description": "用于检索商品的简洁关键词。"}},
                "required": ["query"],
                "additionalProperties": False,
            },
        }})
    if actions:
        tools.append({"type": "function", "function": {
            "name": "click",
            "description": CLICK_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "string", "enum": list(actions), "description": "必须逐字选择当前可点击值之一。"}},
                "required": ["value"],
                "additionalProperties": False,
            },
        }})
    if not tools:
        raise ObservationError("no tool is available on this page")
    return tools
