"""``ask_user(question)`` (dialogue mode, ``shopsimrl-dialogue-tools-v1``): ask the simulated shopper one question.

Canonical text action: ``ask_user[QUESTION]`` (one line, 1–``MAX_QUESTION_CHARS`` characters, verbatim). A
question leaves the page as it is, counts toward the episode's action limit like any step and, when valid,
returns the feedback ``{"action", "valid": true, "reason": "executed", "message": "顾客回复：<reply>", "reply":
"<reply>"}``. Rejections are ordinary invalid feedback: ``empty_argument``, ``question_too_long``,
``multiple_actions_not_allowed`` or, once ``max_questions`` have been answered, ``ask_user_unavailable``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...contract import (
    ASK_USER_TOOL,
    EMPTY_ARGUMENT,
    EXECUTED,
    MULTIPLE_ACTIONS,
    PAGE_TOOL_NAMES,
    QUESTION_ARGUMENT,
    REPLY_PREFIX,
    chained_actions,
)
from ...versions import MAX_QUESTION_CHARS
from .._actions import feedback
from ._tool import Tool, ToolSession

ASK_USER_DESCRIPTION = "向顾客提一个问题，了解其购物需求（预算、规格、具体要求等）。页面不会改变，工具结果是顾客的回复。"
QUESTION_DESCRIPTION = "用一句话向顾客提出的问题。"
QUESTION_TOO_LONG = "question_too_long"
ASK_USER_UNAVAILABLE = "ask_user_unavailable"
MSG_EMPTY_QUESTION = "ask_user[...] 的问题不能为空"
MSG_QUESTION_TOO_LONG = f"问题不能超过 {MAX_QUESTION_CHARS} 个字符"
MSG_ASK_USER_UNAVAILABLE = "提问次数已用完，不能再向顾客提问"
MSG_MULTIPLE = "一次调用只能执行一个 search[...]、click[...] 或 ask_user[...] 动作"
# ``]`` followed (optionally after one separator) by another action: ``ask_user[a] ask_user[b]``. The tools of
# shopsimrl-dialogue-tools-v1 (a tool registered later does not change this rule).
_CHAINED = chained_actions((*PAGE_TOOL_NAMES, ASK_USER_TOOL))


class AskUserTool(Tool):
    name: ClassVar[str] = ASK_USER_TOOL
    argument: ClassVar[str] = QUESTION_ARGUMENT
    description: ClassVar[str] = ASK_USER_DESCRIPTION
    argument_description: ClassVar[str] = QUESTION_DESCRIPTION
    min_length: ClassVar[int | None] = 1
    max_length: ClassVar[int | None] = MAX_QUESTION_CHARS
    returns: ClassVar[str] = "The shopper's reply (the page does not change)."
    dialogue_only: ClassVar[bool] = True
    feedback_codes: ClassVar[tuple[str, ...]] = (
        EXECUTED, EMPTY_ARGUMENT, QUESTION_TOO_LONG, MULTIPLE_ACTIONS, ASK_USER_UNAVAILABLE,
    )

    def offered(self, state: Mapping[str, Any]) -> bool:
        dialogue = state.get("dialogue")
        return isinstance(dialogue, Mapping) and dialogue.get("ask_user_available") is True

    def apply(self, session: ToolSession, argument: str | None, shown: str) -> dict[str, Any]:
        if argument is None or not argument.strip():
            return feedback(shown, False, EMPTY_ARGUMENT, MSG_EMPTY_QUESTION)
        if len(argument) > MAX_QUESTION_CHARS:
            return feedback(shown, False, QUESTION_TOO_LONG, MSG_QUESTION_TOO_LONG)
        if _CHAINED.search(argument) is not None:
            return feedback(shown, False, MULTIPLE_ACTIONS, MSG_MULTIPLE)
        conversation = session.conversation
        if conversation is None or conversation.questions_left() <= 0:
            return feedback(shown, False, ASK_USER_UNAVAILABLE, MSG_ASK_USER_UNAVAILABLE)
        reply = conversation.ask(argument.strip())  # may raise ShopperCallError: nothing counted yet
        return feedback(shown, True, EXECUTED, REPLY_PREFIX + reply, reply=reply)


ASK_USER = AskUserTool()
