"""The page's tools, rebuilt from the page text, for clients whose tool list is fixed for a whole episode.

The runtime sends each page's own tools (``search`` only where the page offers it, ``click`` with the page's
enum). Harnesses that list MCP tools once per episode (verifiers' chat loop) send a static ``click(value)``
without an enum; the page text still lists the clickable values (``可点击元素：``) and whether search is offered
(``页面能力：``), so the policy server rebuilds the tools a built-in policy would have seen. In dialogue mode the
``对话：`` line says whether ``ask_user`` is still offered; it is rebuilt when the static list has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..contract import ASK_USER_CAPABILITY, ASK_USER_TOOL, CLICK_TOOL, SEARCH_TOOL, VALUE_ARGUMENT
from ..contract import SEARCH_CAPABILITY_LINE as SEARCH_CAPABILITY
from ..env.tools import tools_for_state
from .page_text import parse_page
from .policy import context_from_messages


def _has_enum(tools: Sequence[Mapping[str, Any]]) -> bool:
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and function.get("name") == CLICK_TOOL:
            value = function.get("parameters", {}).get("properties", {}).get(VALUE_ARGUMENT, {})
            return isinstance(value, Mapping) and "enum" in value
    return False


def page_tools(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` unchanged when ``click`` has an enum (or is absent); else the current page's own tools."""
    names = {t.get("function", {}).get("name") for t in tools if isinstance(t, Mapping)}
    if CLICK_TOOL not in names or _has_enum(tools):
        return [dict(t) for t in tools]
    observation = context_from_messages(messages, tools).observation
    page = parse_page(observation)
    lines = observation.splitlines()
    state: dict[str, Any] = {"search_available": SEARCH_CAPABILITY in lines and SEARCH_TOOL in names,
                             "actions": list(page.clickables)}
    if ASK_USER_TOOL in names and any(line.startswith(ASK_USER_CAPABILITY) for line in lines):
        state["dialogue"] = {"ask_user_available": True}
    rebuilt = tools_for_state(state)
    return rebuilt or [dict(t) for t in tools]
