"""Canonical action strings (env_spec §4.3) and the step feedback vocabulary (§4.4).

The agent's tool call becomes ``search[...]`` or ``click[...]``; this module parses such strings exactly
as the reference does (argument verbatim, never stripped or casefolded) and names every feedback code and
message, so the state machine never spells a contract string itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Feedback codes (``reason``), env_spec §4.3–4.4.
EXECUTED = "executed"
INVALID_FORMAT = "invalid_format"
MULTIPLE_ACTIONS = "multiple_actions_not_allowed"
EMPTY_ARGUMENT = "empty_argument"
SEARCH_UNAVAILABLE = "search_unavailable"
ALREADY_SELECTED = "already_selected"
INCOMPLETE_OPTIONS = "incomplete_options"
UNAVAILABLE_ACTION = "unavailable_action"
FEEDBACK_CODES = (
    EXECUTED,
    INVALID_FORMAT,
    MULTIPLE_ACTIONS,
    EMPTY_ARGUMENT,
    SEARCH_UNAVAILABLE,
    ALREADY_SELECTED,
    INCOMPLETE_OPTIONS,
    UNAVAILABLE_ACTION,
)

# Parse-error messages (§4.3).
MSG_NOT_STRING = "动作必须是字符串"
MSG_EMPTY_ACTION = "动作不能为空"
MSG_BAD_FORMAT = "动作格式无效"
MSG_STRICT_FORMAT = "动作必须严格使用 search[...] 或 click[...] 格式"
MSG_EMPTY_NAME = "动作名称不能为空"
MSG_MULTIPLE = "一次调用只能执行一个 search[...] 或 click[...] 动作"
# Step messages (§4.4); the ones ending in "：" are prefixes completed by the argument or the missing axes.
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
MISSING_AXES_SEPARATOR = "、"

# ``Action:`` lines (start of text or of a line, optional whitespace around the colon, non-empty content): the
# reference pattern is ``^\s*Action\s*:\s*(.+)$`` (IGNORECASE, MULTILINE). Run as one regex it is quadratic on
# long whitespace runs (every line start rescans the run), so ``action_lines`` finds each ``Action:`` label
# once and checks its own line instead.
ACTION_LINE_PATTERN = r"^\s*Action\s*:\s*(.+)$"
_ACTION_LABEL = re.compile(r"Action\s*:", re.IGNORECASE)
_ACTION_TAIL = re.compile(r"Action\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
# ``]`` followed (optionally after one separator) by another ``search[`` / ``click[``.
_CHAINED = re.compile(r"\]\s*(?:[,;，；]\s*)?(?:search|click)\s*\[", re.IGNORECASE)
# NAME[ARG]: NAME has no brackets or line breaks, ARG has no newline (brackets allowed), text ends with ``]``.
_BRACKETED = re.compile(r"([^\[\]\r\n]+)\[([^\n]*)\]")


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """A parsed action string: ``name``/``argument`` on success, ``error_code``/``error_message`` otherwise.

    ``name`` is the raw stripped name (the state machine casefolds it); ``argument`` is verbatim and is None
    for a bare word such as ``finish``.
    """

    name: str | None
    argument: str | None
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None


def _error(code: str, message: str) -> ParsedAction:
    return ParsedAction(None, None, code, message)


_NOT_STRING = _error(INVALID_FORMAT, MSG_NOT_STRING)
_EMPTY = _error(INVALID_FORMAT, MSG_EMPTY_ACTION)
_MULTIPLE = _error(MULTIPLE_ACTIONS, MSG_MULTIPLE)
_BAD_FORMAT = _error(INVALID_FORMAT, MSG_BAD_FORMAT)
_STRICT_FORMAT = _error(INVALID_FORMAT, MSG_STRICT_FORMAT)
_EMPTY_NAME = _error(INVALID_FORMAT, MSG_EMPTY_NAME)


def action_lines(text: str, limit: int | None = None) -> list[str]:
    """``re.findall(ACTION_LINE_PATTERN, text, re.I | re.M)`` in linear time (same matches, same order).

    A match starts at a line start followed by whitespace and then an ``Action:`` label. Only the first
    label after the scan position can end such a prefix (anything non-blank before it breaks the run), and
    only if its own line holds nothing but whitespace before it (an earlier line start's run would cross
    that line's start too). So each label is found once and each stretch of text is read a bounded number
    of times. ``limit``: stop after that many (the callers only need to know whether there are 0, 1 or more).
    """
    found: list[str] = []
    start = 0  # always a line start, and never before the end of the previous match
    while (label := _ACTION_LABEL.search(text, start)) is not None:
        at = label.start()
        line = text.rfind("\n", start, at) + 1 or start
        tail = _ACTION_TAIL.match(text, at) if text[line:at].isspace() or line == at else None
        if tail is not None:
            found.append(tail.group(1))
            if limit is not None and len(found) >= limit:
                break
        newline = text.find("\n", tail.end() if tail is not None else at)
        if newline < 0:
            break
        start = newline + 1
    return found


def extract_action(response: str) -> str:
    """The action inside a model response, as the HTTP layer takes it out (§4.3, last paragraph).

    Literal two-character ``\\n`` sequences become newlines; exactly one ``Action:`` line gives its trimmed
    content, anything else gives the whole stripped text (so two ``Action:`` lines reach the parser, which
    rejects them as multiple actions). A non-string is returned unchanged for the parser to reject.
    """
    if not isinstance(response, str):
        return response
    text = response.replace("\\n", "\n")
    found = action_lines(text, limit=2)
    if len(found) == 1:
        return found[0].strip()
    return text.strip()


def parse_action(action: object) -> ParsedAction:
    """Parse one canonical action string; never raises (errors come back as codes and messages)."""
    if not isinstance(action, str):
        return _NOT_STRING
    text = action.strip()
    if not text:
        return _EMPTY
    if _CHAINED.search(text) is not None or len(action_lines(text, limit=2)) > 1:
        return _MULTIPLE
    if "[" not in text and "]" not in text:
        if "\n" in text:
            return _BAD_FORMAT
        return ParsedAction(text, None)
    match = _BRACKETED.fullmatch(text)
    if match is None:
        return _STRICT_FORMAT
    name = match.group(1).strip()
    if not name:
        return _EMPTY_NAME
    return ParsedAction(name, match.group(2))


def feedback(
    action: str,
    valid: bool,
    reason: str,
    message: str,
    *,
    missing_option_axes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The feedback object stored as ``last_action`` and returned as ``action_feedback`` (§4.4 item 4)."""
    payload: dict[str, Any] = {"action": action, "valid": valid, "reason": reason, "message": message}
    if missing_option_axes is not None:
        payload["missing_option_axes"] = list(missing_option_axes)
    return payload


class Feedback:
    """Builders for every §4.4 outcome, so the state machine names outcomes instead of spelling strings."""

    @staticmethod
    def default(action: str) -> dict[str, Any]:
        """The value before the checks run (§4.4 item 4)."""
        return feedback(action, False, INVALID_FORMAT, MSG_BAD_FORMAT)

    @staticmethod
    def parse_error(action: str, parsed: ParsedAction) -> dict[str, Any]:
        return feedback(action, False, parsed.error_code or INVALID_FORMAT, parsed.error_message or MSG_BAD_FORMAT)

    @staticmethod
    def search_executed(action: str) -> dict[str, Any]:
        return feedback(action, True, EXECUTED, MSG_SEARCH_EXECUTED)

    @staticmethod
    def click_executed(action: str) -> dict[str, Any]:
        return feedback(action, True, EXECUTED, MSG_CLICK_EXECUTED)

    @staticmethod
    def purchase_executed(action: str) -> dict[str, Any]:
        return feedback(action, True, EXECUTED, MSG_PURCHASE_EXECUTED)

    @staticmethod
    def empty_search(action: str) -> dict[str, Any]:
        return feedback(action, False, EMPTY_ARGUMENT, MSG_EMPTY_SEARCH)

    @staticmethod
    def empty_click(action: str) -> dict[str, Any]:
        return feedback(action, False, EMPTY_ARGUMENT, MSG_EMPTY_CLICK)

    @staticmethod
    def search_unavailable(action: str) -> dict[str, Any]:
        return feedback(action, False, SEARCH_UNAVAILABLE, MSG_SEARCH_UNAVAILABLE)

    @staticmethod
    def already_selected(action: str, argument: str) -> dict[str, Any]:
        return feedback(action, False, ALREADY_SELECTED, MSG_ALREADY_SELECTED + argument)

    @staticmethod
    def no_buy_button(action: str) -> dict[str, Any]:
        return feedback(action, False, UNAVAILABLE_ACTION, MSG_NO_BUY_BUTTON)

    @staticmethod
    def incomplete_options(action: str, missing_option_axes: Sequence[str]) -> dict[str, Any]:
        message = MSG_INCOMPLETE_OPTIONS + MISSING_AXES_SEPARATOR.join(missing_option_axes)
        return feedback(action, False, INCOMPLETE_OPTIONS, message, missing_option_axes=missing_option_axes)

    @staticmethod
    def unavailable_action(action: str, argument: str) -> dict[str, Any]:
        return feedback(action, False, UNAVAILABLE_ACTION, MSG_UNAVAILABLE_ACTION + argument)

    @staticmethod
    def unknown_action_name(action: str) -> dict[str, Any]:
        return feedback(action, False, INVALID_FORMAT, MSG_UNKNOWN_ACTION_NAME)
