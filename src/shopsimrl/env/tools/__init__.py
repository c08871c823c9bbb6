"""The environment's tools (docs/contract.md#tools): one object per tool, and the registry every path reads.

Adding a tool is its own module (a :class:`Tool` subclass: name, argument schema, descriptions, when a page offers
it, how it changes the session through the :class:`ToolSession` primitives, its feedback codes) plus one line in
:data:`TOOLS`. The per-page list
(:func:`tools_for_state`, rebuilt from the ``observation_state`` every turn so that a model can only name values
the page offers; byte-for-byte the reference's ``shopping-tools-paper-v4`` schemas), the whole-episode list
(:func:`episode_tools`), the tool names (:func:`tool_names`), the session's dispatch, the validator, OpenEnv's
models (:func:`tool_choice_summary`, :func:`arguments_summary`), TRL's environment class and the verifiers
toolset all derive from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...contract import ASK_USER_TOOL as ASK_USER_TOOL
from ...contract import CLICK_TOOL as CLICK_TOOL
from ...contract import SEARCH_TOOL as SEARCH_TOOL
from ...errors import DataError
from ._tool import Conversation, Tool, ToolSession, tool_method
from .ask_user import ASK_USER, ASK_USER_DESCRIPTION, QUESTION_DESCRIPTION
from .click import CLICK, CLICK_DESCRIPTION, EPISODE_VALUE_DESCRIPTION, VALUE_DESCRIPTION
from .search import QUERY_DESCRIPTION, SEARCH, SEARCH_DESCRIPTION

# The registry, in the order a page lists its tools.
TOOLS: list[Tool] = [
    SEARCH,
    CLICK,
    ASK_USER,
]


def tool_names() -> tuple[str, ...]:
    """The registered tools' names, in registry order (``search``, ``click``, ``ask_user``)."""
    return tuple(tool.name for tool in TOOLS)


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", or " + items[-1]


def tool_choice_summary() -> str:
    """One line naming every tool, for a schema's field description (dialogue-only ones marked)."""
    return _or_list([tool.name + (" (dialogue mode)" if tool.dialogue_only else "") for tool in TOOLS])


def arguments_summary() -> str:
    """One line giving each tool's arguments object, for a schema's field description."""
    return ", ".join(f'{{"{tool.argument}": {tool.argument_kind}}} for {tool.name}' for tool in TOOLS)


def tool_named(name: object) -> Tool | None:
    """The registered tool called ``name`` (exact spelling, as a function call names it), else None."""
    return next((tool for tool in TOOLS if tool.name == name), None)


def argument_key(name: object) -> str | None:
    """The one argument key of tool ``name``, else None."""
    tool = tool_named(name)
    return tool.argument if tool is not None else None


def action_of_call(name: object, arguments: object) -> str | None:
    """The canonical action of a tool call ``name(arguments)``; None unless the tool is registered and its one
    argument key holds a string (other keys are ignored here: the validator judges them)."""
    tool = tool_named(name)
    if tool is None or not isinstance(arguments, Mapping):
        return None
    value = arguments.get(tool.argument)
    return tool.action(value) if isinstance(value, str) else None


def tools_for_state(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool list for a page: each registered tool the page offers, in registry order (``search``, ``click``,
    then, while the state's ``dialogue`` block allows it, ``ask_user``); a state without a ``dialogue`` block
    (every non-dialogue episode) gets exactly the reference tools.

    Raises DataError when ``state`` is not a mapping or ``actions`` is not a list of non-empty
    strings. An empty result (the terminal page) is returned, not raised: the turn loop decides.
    """
    if not isinstance(state, Mapping):
        raise DataError("tools need an observation_state mapping", code="observation")
    actions = state.get("actions")
    if not isinstance(actions, list) or not all(isinstance(action, str) and action for action in actions):
        raise DataError("observation_state.actions must be a list of non-empty strings", code="observation")
    return [tool.schema(state) for tool in TOOLS if tool.offered(state)]


def episode_tools(*, dialogue: bool = False) -> list[dict[str, Any]]:
    """The tool list for a whole episode (rendered once: chat templates that put tools in the system block,
    OpenEnv's static MCP list): every tool without the page's enum, dialogue-only ones in dialogue mode.

    The page's clickable values are in the observation text (``可点击元素``), and the validator still checks each
    call against the page's own tools.
    """
    return [tool.episode_schema() for tool in TOOLS if dialogue or not tool.dialogue_only]


__all__ = [
    "ASK_USER_DESCRIPTION",
    "ASK_USER_TOOL",
    "CLICK_DESCRIPTION",
    "CLICK_TOOL",
    "EPISODE_VALUE_DESCRIPTION",
    "QUERY_DESCRIPTION",
    "QUESTION_DESCRIPTION",
    "SEARCH_DESCRIPTION",
    "SEARCH_TOOL",
    "TOOLS",
    "VALUE_DESCRIPTION",
    "Conversation",
    "Tool",
    "ToolSession",
    "action_of_call",
    "argument_key",
    "arguments_summary",
    "episode_tools",
    "tool_choice_summary",
    "tool_method",
    "tool_named",
    "tool_names",
    "tools_for_state",
]
