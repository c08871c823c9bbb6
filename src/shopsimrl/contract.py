"""The contract's vocabulary, defined once: the words and small rules every path shares.

The engine, the HTTP service, the clients, the runtime, the built-in policies and the trainer / OpenEnv /
verifiers adapters all speak the same contract (docs/contract.md): page types, button labels, termination
reasons, interaction and task modes, tool names and their argument keys, the action-string grammar
(``search[...]`` / ``click[...]`` / ``ask_user[...]``), how an action is read out of a model's free text, the
visible-instruction rule and the task-id check. Each is spelled here and imported everywhere else, so a
word cannot drift between paths (``tests/test_contract.py`` checks that the literals appear nowhere else).

This module imports nothing from the package but ``errors``, so every layer may use it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeGuard, overload

from .errors import RequestError

# --------------------------------------------------------------------------------------------- pages
# docs/contract.md#pages. ``information_subpage`` is part of the vocabulary but never reached.
PageType = Literal["search_home", "search_results", "product_detail", "information_subpage", "terminal"]
SEARCH_HOME: Final = "search_home"
SEARCH_RESULTS: Final = "search_results"
PRODUCT_DETAIL: Final = "product_detail"
INFORMATION_SUBPAGE: Final = "information_subpage"
TERMINAL: Final = "terminal"
PAGE_TYPES: frozenset[str] = frozenset({SEARCH_HOME, SEARCH_RESULTS, PRODUCT_DETAIL, INFORMATION_SUBPAGE, TERMINAL})

# The page text's own words (headings, line prefixes) are private to its renderer and reader,
# ``shopsimrl.env._observation``: policies read the state, never the text's prefixes.
REPLY_PREFIX: Final = "顾客回复："  # the feedback line that carries the shopper's reply
# What the page text shows for a missing value (price, brand, category, search text).
MISSING_TEXT: Final = "未提供"

# --------------------------------------------------------------------------------------------- buttons
# docs/contract.md#clickables: casefolded labels; the search button is never a clickable.
BACK_TO_SEARCH: Final = "back to search"
PREV: Final = "< prev"
NEXT: Final = "next >"
BUY_NOW: Final = "buy now"
ATTRIBUTES: Final = "attributes"
SEARCH_BUTTON: Final = "search"
BUTTON_LABELS: frozenset[str] = frozenset({BACK_TO_SEARCH, PREV, NEXT, BUY_NOW, ATTRIBUTES, SEARCH_BUTTON})
# An option value's clickable is ``<axis>=<display value>``.
OPTION_SEPARATOR: Final = "="


def option_label(axis: str, value: str) -> str:
    """The clickable of one option value on a product page."""
    return f"{axis}{OPTION_SEPARATOR}{value}"

# --------------------------------------------------------------------------------------------- modes
InteractionMode = Literal["single_turn", "multi_turn"]
SINGLE_TURN: Final = "single_turn"
MULTI_TURN: Final = "multi_turn"  # also every dialogue episode
INTERACTION_MODES: tuple[InteractionMode, ...] = (SINGLE_TURN, MULTI_TURN)

TaskMode = Literal["persona", "standard"]
PERSONA_MODE: Final = "persona"
STANDARD_MODE: Final = "standard"
TASK_MODES: tuple[TaskMode, ...] = (PERSONA_MODE, STANDARD_MODE)


def task_mode(persona: bool) -> TaskMode:
    """The ``task_mode`` a reset reports for the mode it ran in."""
    return PERSONA_MODE if persona else STANDARD_MODE


# --------------------------------------------------------------------------------------------- episode ends
# A runner ends an episode with ``terminate(reason)``; a purchase ends it from inside.
TerminationReason = Literal["action_limit", "generation_length"]
EndReason = Literal["purchase", "action_limit", "generation_length"]
PURCHASE: Final = "purchase"
ACTION_LIMIT: Final = "action_limit"
GENERATION_LENGTH: Final = "generation_length"
TERMINATION_REASONS: tuple[TerminationReason, ...] = (ACTION_LIMIT, GENERATION_LENGTH)
END_REASONS: tuple[EndReason, ...] = (PURCHASE, *TERMINATION_REASONS)

# The ``message`` of each result (docs/contract.md#environment-interface).
CONTINUE_MESSAGE: Final = "Continue interaction"
INVALID_MESSAGE: Final = "Invalid action"


def started_message(task_id: int) -> str:
    """The ``message`` of a reset."""
    return f"Task {task_id} started"


def terminated_message(reason: str) -> str:
    """The ``message`` of a ``terminate`` result (the reference's)."""
    return f"Episode terminated: {reason}"


# --------------------------------------------------------------------------------------------- tools
# docs/contract.md#tools: ``search`` and ``click`` on pages, ``ask_user`` in dialogue mode only. The list of every
# tool is the registry's (``shopsimrl.env.tools.TOOLS``, ``tool_names()``); the page tools below are the
# reference's action grammar (``search[...]`` / ``click[...]``, the chained-actions rule of ``parse_action``).
PageToolName = Literal["search", "click"]
SEARCH_TOOL: Final = "search"
CLICK_TOOL: Final = "click"
ASK_USER_TOOL: Final = "ask_user"
PAGE_TOOL_NAMES: tuple[PageToolName, ...] = (SEARCH_TOOL, CLICK_TOOL)
# Each tool's one argument (the tools themselves, their schemas and rules: ``shopsimrl.env.tools``).
QUERY_ARGUMENT: Final = "query"
VALUE_ARGUMENT: Final = "value"
QUESTION_ARGUMENT: Final = "question"

# --------------------------------------------------------------------------------------------- shoppers
# docs/contract.md#reset: the simulated shoppers of dialogue mode (None: the reference single-agent episode).
ShopperName = Literal["rule", "llm"]
RULE_SHOPPER: Final = "rule"
LLM_SHOPPER: Final = "llm"
SHOPPER_NAMES: tuple[ShopperName, ...] = (RULE_SHOPPER, LLM_SHOPPER)

# --------------------------------------------------------------------------------------------- action strings


def format_action(name: str, argument: object) -> str:
    """The canonical action string of one tool call: ``name[argument]``, the argument's ends trimmed."""
    return f"{name}[{str(argument).strip()}]"


def action_argument(action: str, name: str) -> str | None:
    """The argument of an action that :func:`format_action` wrote for tool ``name``, else None (the inverse
    of the formatting, for reading histories back; the environment's own reading is :func:`parse_action`)."""
    prefix = f"{name}["
    if action.startswith(prefix) and action.endswith("]") and len(action) > len(prefix):
        return action[len(prefix):-1]
    return None


# Feedback codes (``reason`` of ``action_feedback``), docs/contract.md#step-checks.
EXECUTED: Final = "executed"
INVALID_FORMAT: Final = "invalid_format"
MULTIPLE_ACTIONS: Final = "multiple_actions_not_allowed"
EMPTY_ARGUMENT: Final = "empty_argument"
SEARCH_UNAVAILABLE: Final = "search_unavailable"
ALREADY_SELECTED: Final = "already_selected"
INCOMPLETE_OPTIONS: Final = "incomplete_options"
UNAVAILABLE_ACTION: Final = "unavailable_action"

# Parse-error messages (docs/contract.md#action-strings).
MSG_NOT_STRING: Final = "动作必须是字符串"
MSG_EMPTY_ACTION: Final = "动作不能为空"
MSG_BAD_FORMAT: Final = "动作格式无效"
MSG_STRICT_FORMAT: Final = "动作必须严格使用 search[...] 或 click[...] 格式"
MSG_EMPTY_NAME: Final = "动作名称不能为空"
MSG_MULTIPLE: Final = "一次调用只能执行一个 search[...] 或 click[...] 动作"

# ``Action:`` lines (start of text or of a line, optional whitespace around the colon, non-empty content): the
# reference pattern is ``^\s*Action\s*:\s*(.+)$`` (IGNORECASE, MULTILINE). Run as one regex it is quadratic on
# long whitespace runs (every line start rescans the run), so ``action_lines`` finds each ``Action:`` label
# once and checks its own line instead.
ACTION_LINE_PATTERN: Final = r"^\s*Action\s*:\s*(.+)$"
_ACTION_LABEL = re.compile(r"Action\s*:", re.IGNORECASE)
_ACTION_TAIL = re.compile(r"Action\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
# NAME[ARG]: NAME has no brackets or line breaks, ARG has no newline (brackets allowed), text ends with ``]``.
_BRACKETED = re.compile(r"([^\[\]\r\n]+)\[([^\n]*)\]")


def chained_actions(names: Collection[str]) -> re.Pattern[str]:
    """``]`` followed (optionally after one separator) by another ``NAME[`` of ``names``: two actions in one."""
    alternatives = "|".join(re.escape(name) for name in names)
    return re.compile(rf"\]\s*(?:[,;，；]\s*)?(?:{alternatives})\s*\[", re.IGNORECASE)


_CHAINED = chained_actions(PAGE_TOOL_NAMES)


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


@overload
def extract_action(response: str) -> str: ...
@overload
def extract_action(response: object) -> object: ...
def extract_action(response: object) -> object:
    """The action inside a model's answer (docs/contract.md#model-text); every ``step`` applies it once.

    Literal two-character ``\\n`` sequences become newlines; exactly one ``Action:`` line gives its trimmed
    content, anything else gives the whole stripped text (so two ``Action:`` lines reach the parser, which
    rejects them as multiple actions). A canonical action comes back as it is (minus surrounding blanks).
    A non-string is returned unchanged for the parser to reject.
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


# --------------------------------------------------------------------------------------------- rules


def require_action_text(action: object) -> str:
    """A step's action must be text (a canonical action or model text); anything else is the caller's bug,
    raised the same way in process and behind the service (a string that does not parse is feedback)."""
    if not isinstance(action, str):
        raise RequestError(f"a step action must be a string, got {type(action).__name__}", code="invalid_action")
    if not action.isascii():
        try:
            action.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate (JSON's "\ud800"): no search or page can hold it
            raise RequestError(f"a step action must be valid Unicode text: character {exc.start} is a lone "
                                     f"surrogate ({action[exc.start]!a})", code="invalid_action") from None
    return action


def is_task_id(value: object) -> TypeGuard[int]:
    """The one task-id rule (docs/contract.md#reset): an ``int`` and not a ``bool`` (no float, no string)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_task_id(task_id: object) -> int:
    """A task id by :func:`is_task_id`; raises RequestError."""
    if not is_task_id(task_id):
        raise RequestError("task idx must be an integer", code="invalid_task_id")
    return task_id


def visible_instruction(goal: Mapping[str, Any], persona: bool) -> str:
    """The instruction an agent sees: the short ``instruction_simple`` in persona mode on a task that has a
    persona, else the full ``instruction_text`` (docs/contract.md#reset)."""
    if persona and goal.get("user_persona"):
        return str(goal.get("instruction_simple") or "")
    return str(goal.get("instruction_text") or "")


__all__ = [
    "ACTION_LIMIT",
    "ACTION_LINE_PATTERN",
    "ALREADY_SELECTED",
    "ASK_USER_TOOL",
    "ATTRIBUTES",
    "BACK_TO_SEARCH",
    "BUTTON_LABELS",
    "BUY_NOW",
    "CLICK_TOOL",
    "CONTINUE_MESSAGE",
    "EMPTY_ARGUMENT",
    "END_REASONS",
    "EXECUTED",
    "GENERATION_LENGTH",
    "INCOMPLETE_OPTIONS",
    "INFORMATION_SUBPAGE",
    "INTERACTION_MODES",
    "INVALID_FORMAT",
    "INVALID_MESSAGE",
    "MISSING_TEXT",
    "MSG_BAD_FORMAT",
    "MSG_EMPTY_ACTION",
    "MSG_EMPTY_NAME",
    "MSG_MULTIPLE",
    "MSG_NOT_STRING",
    "MSG_STRICT_FORMAT",
    "MULTIPLE_ACTIONS",
    "MULTI_TURN",
    "NEXT",
    "OPTION_SEPARATOR",
    "PAGE_TOOL_NAMES",
    "PAGE_TYPES",
    "PERSONA_MODE",
    "PREV",
    "PRODUCT_DETAIL",
    "PURCHASE",
    "QUERY_ARGUMENT",
    "QUESTION_ARGUMENT",
    "SEARCH_BUTTON",
    "SEARCH_HOME",
    "SEARCH_RESULTS",
    "SEARCH_TOOL",
    "SEARCH_UNAVAILABLE",
    "SINGLE_TURN",
    "STANDARD_MODE",
    "TASK_MODES",
    "TERMINAL",
    "TERMINATION_REASONS",
    "UNAVAILABLE_ACTION",
    "VALUE_ARGUMENT",
    "EndReason",
    "InteractionMode",
    "PageToolName",
    "PageType",
    "ParsedAction",
    "TaskMode",
    "TerminationReason",
    "action_argument",
    "action_lines",
    "chained_actions",
    "check_task_id",
    "extract_action",
    "format_action",
    "is_task_id",
    "option_label",
    "parse_action",
    "started_message",
    "task_mode",
    "terminated_message",
    "visible_instruction",
]
