"""The page's tools, rebuilt from the page text's state, for clients whose tool list is fixed for a whole episode.

The runtime sends each page's own tools (``search`` only where the page offers it, ``click`` with the page's
enum). Harnesses that list MCP tools once per episode (verifiers' chat loop) send a static ``click(value)``
without an enum; the page text still shows the state the tools derive from (the clickable values, whether
search and, in dialogue mode, ``ask_user`` are offered), so the policy server reads that state back with the
renderer's own reader and rebuilds the tools a built-in policy would have seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..contract import CLICK_TOOL, VALUE_ARGUMENT
from ..env._observation import read_observation
from ..env.tools import tools_for_state
from .policy import context_from_messages


def _has_enum(tools: Sequence[Mapping[str, Any]]) -> bool:
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and function.get("name") == CLICK_TOOL:
            value = function.get("parameters", {}).get("properties", {}).get(VALUE_ARGUMENT, {})
            return isinstance(value, Mapping) and "enum" in value
    return False


def page_tools(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` unchanged when ``click`` has an enum (or is absent); else the current page's own tools: those of
    the static list that the state read from the page text offers, with the page's enum."""
    names = {t.get("function", {}).get("name") for t in tools if isinstance(t, Mapping)}
    if CLICK_TOOL not in names or _has_enum(tools):
        return [dict(t) for t in tools]
    state = read_observation(context_from_messages(messages, tools).observation)
    rebuilt = [tool for tool in tools_for_state(state) if tool["function"]["name"] in names]
    return rebuilt or [dict(t) for t in tools]
