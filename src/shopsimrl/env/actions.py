"""Canonical action strings (env_spec §4.3) and the step feedback vocabulary (§4.4).

The agent's tool call becomes ``search[...]`` or ``click[...]``; this module parses such strings exactly
as the reference does (argument verbatim, never stripped or casefolded) and names every feedback code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

EXECUTED = "executed"
INVALID_FORMAT = "invalid_format"
MULTIPLE_ACTIONS = "multiple_actions_not_allowed"
EMPTY_ARGUMENT = "empty_argument"
SEARCH_UNAVAILABLE = "search_unavailable"
ALREADY_SELECTED = "already_selected"
INCOMPLETE_OPTIONS = "incomplete_options"
UNAVAILABLE_ACTION = "unavailable_action"

MSG_NOT_STRING = "动作必须是字符串"
MSG_EMPTY_ACTION = "动作不能为空"
MSG_BAD_FORMAT = "动作格式无效"
MSG_STRICT_FORMAT = "动作必须严格使用 search[...] 或 click[...] 格式"
MSG_EMPTY_NAME = "动作名称不能为空"
MSG_MULTIPLE = "一次调用只能执行一个 search[...] 或 click[...] 动作"
MSG_EMPTY_SEARCH = "search[...] 的关键词不能为空"
MSG_SEARCH_UNAVAILABLE = "当前页面不提供搜索操作"
MSG_SEARCH_EXECUTED = "搜索已执行"
MSG_EMPTY_CLICK = "click[...] 的点击值不能为空"
MSG_ALREADY_SELECTED = "该规格已经选中："
MSG_PURCHASE_EXECUTED = "购买已执行"
MSG_NO_BUY_BUTTON = "当前页面没有可用的购买按钮"
MSG_INCOMPLETE_OPTIONS = "购买前还需选择规格轴："
MSG_CLICK_EXECUTED = "点击已执行"
MSG_UNAVAILABLE_ACTION = "当前页面不存在可点击项："
MSG_UNKNOWN_ACTION_NAME = "动作必须使用 search[...] 或 click[...] 格式"

_ACTION_LINE = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
_CHAINED = re.compile(r"\]\s*(?:[,;，；]\s*)?(?:search|click)\s*\[", re.IGNORECASE)
_BRACKETED = re.compile(r"([^\[\]\r\n]+)\[([^\n]*)\]", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ParsedAction:
    name: str | None
    argument: str | None
    error_code: str | None = None
    error_message: str | None = None


def _error(code: str, message: str) -> ParsedAction:
    return ParsedAction(None, None, code, message)


def extract_action(response: str) -> str:
    """The action inside a model response: the one ``Action:`` line, else the whole stripped text."""
    text = response.replace("\\n", "\n")
    lines = [match.strip() for match in _ACTION_LINE.findall(text)]
    if len(lines) == 1:
        return lines[0]
    return text.strip()


def parse_action(action: object) -> ParsedAction:
    if not isinstance(action, str):
        return _error(INVALID_FORMAT, MSG_NOT_STRING)
    text = action.strip()
    if not text:
        return _error(INVALID_FORMAT, MSG_EMPTY_ACTION)
    if len(_ACTION_LINE.findall(text)) > 1 or _CHAINED.search(text):
        return _error(MULTIPLE_ACTIONS, MSG_MULTIPLE)
    if "[" not in text and "]" not in text:
        if "\n" in text:
            return _error(INVALID_FORMAT, MSG_BAD_FORMAT)
        return ParsedAction(text, None)
    match = _BRACKETED.fullmatch(text)
    if match is None:
        return _error(INVALID_FORMAT, MSG_STRICT_FORMAT)
    name = match.group(1).strip()
    if not name:
        return _error(INVALID_FORMAT, MSG_EMPTY_NAME)
    return ParsedAction(name, match.group(2))


def feedback(action: str, valid: bool, reason: str, message: str, *, missing_option_axes: list[str] | None = None) -> dict[str, Any]:
    """The feedback object stored as ``last_action`` and returned as ``action_feedback``."""
    payload: dict[str, Any] = {"action": action, "valid": valid, "reason": reason, "message": message}
    if missing_option_axes is not None:
        payload["missing_option_axes"] = list(missing_option_axes)
    return payload
