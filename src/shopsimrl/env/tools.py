"""OpenAI function tools for a page (docs/contract.md#tools): ``search`` when offered, ``click`` over the page's enum.

Tools are rebuilt from the ``observation_state`` every turn, so a model can only name values that the page
offers; the schemas are byte-for-byte the reference's (``shopping-tools-paper-v4``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract import (
    ASK_USER_TOOL,
    CLICK_TOOL,
    QUERY_ARGUMENT,
    QUESTION_ARGUMENT,
    SEARCH_TOOL,
    VALUE_ARGUMENT,
)
from ..errors import ObservationError
from ..versions import MAX_QUESTION_CHARS

SEARCH_DESCRIPTION = "使用关键词搜索商品。仅在当前页面提供此工具时调用。"
QUERY_DESCRIPTION = "用于检索商品的简洁关键词。"
CLICK_DESCRIPTION = "点击当前页面的一个可用按钮、商品或规格选项。"
VALUE_DESCRIPTION = "必须逐字选择当前可点击值之一。"
# Dialogue mode only (``shopsimrl-dialogue-tools-v1``): offered while the state's ``dialogue`` block allows it.
ASK_USER_DESCRIPTION = "向顾客提一个问题，了解其购物需求（预算、规格、具体要求等）。页面不会改变，工具结果是顾客的回复。"
QUESTION_DESCRIPTION = "用一句话向顾客提出的问题。"


def _search_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": SEARCH_TOOL,
            "description": SEARCH_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {QUERY_ARGUMENT: {"type": "string", "minLength": 1, "description": QUERY_DESCRIPTION}},
                "required": [QUERY_ARGUMENT],
                "additionalProperties": False,
            },
        },
    }


def _click_tool(actions: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": CLICK_TOOL,
            "description": CLICK_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {VALUE_ARGUMENT: {"type": "string", "enum": actions, "description": VALUE_DESCRIPTION}},
                "required": [VALUE_ARGUMENT],
                "additionalProperties": False,
            },
        },
    }


def _ask_user_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": ASK_USER_TOOL,
            "description": ASK_USER_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {
                    QUESTION_ARGUMENT: {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUESTION_CHARS,
                        "description": QUESTION_DESCRIPTION,
                    }
                },
                "required": [QUESTION_ARGUMENT],
                "additionalProperties": False,
            },
        },
    }


def tools_for_state(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool list for a page, in order ``search``, ``click``, then (dialogue mode) ``ask_user``.

    ``ask_user`` is added only when the state carries a ``dialogue`` block whose ``ask_user_available`` is
    true, so a state without one (every non-dialogue episode) gets exactly the reference tools.

    Raises ObservationError when ``state`` is not a mapping or ``actions`` is not a list of non-empty
    strings. An empty result (the terminal page) is returned, not raised: the turn loop decides.
    """
    if not isinstance(state, Mapping):
        raise ObservationError("tools need an observation_state mapping")
    actions = state.get("actions")
    if not isinstance(actions, list) or not all(isinstance(action, str) and action for action in actions):
        raise ObservationError("observation_state.actions must be a list of non-empty strings")
    tools: list[dict[str, Any]] = []
    if state.get("search_available") is True:
        tools.append(_search_tool())
    if actions:
        tools.append(_click_tool(list(actions)))
    dialogue = state.get("dialogue")
    if isinstance(dialogue, Mapping) and dialogue.get("ask_user_available") is True:
        tools.append(_ask_user_tool())
    return tools
