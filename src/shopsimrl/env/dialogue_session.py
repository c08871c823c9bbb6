"""A dialogue-mode episode: the page state machine plus ``ask_user[question]`` and a shopper.

Canonical text action: ``ask_user[QUESTION]`` (one line, 1–``MAX_QUESTION_CHARS`` characters, verbatim).
A question leaves the page as it is, counts toward the episode's action limit like any step and, when
valid, returns the feedback ``{"action", "valid": true, "reason": "executed", "message": "顾客回复：<reply>",
"reply": "<reply>"}``; the step result also carries ``shopper_reply``. Rejections are ordinary invalid
feedback: ``empty_argument``, ``question_too_long``, ``multiple_actions_not_allowed`` or, once
``max_questions`` have been answered, ``ask_user_unavailable``. Every other action behaves exactly as in
:class:`ShopSession`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract import ASK_USER_TOOL, TERMINAL, TOOL_NAMES, chained_actions
from ..dialogue.shopper import Shopper
from ..errors import ShopperCallError
from ..versions import DIALOGUE_OBSERVATION_VERSION, MAX_QUESTION_CHARS
from . import actions as act
from .observation import render_observation
from .session import ShopSession

QUESTION_TOO_LONG = "question_too_long"
ASK_USER_UNAVAILABLE = "ask_user_unavailable"
MSG_EMPTY_QUESTION = "ask_user[...] 的问题不能为空"
MSG_QUESTION_TOO_LONG = f"问题不能超过 {MAX_QUESTION_CHARS} 个字符"
MSG_ASK_USER_UNAVAILABLE = "提问次数已用完，不能再向顾客提问"
MSG_MULTIPLE = "一次调用只能执行一个 search[...]、click[...] 或 ask_user[...] 动作"
REPLY_PREFIX = "顾客回复："
ASK_USER_CAPABILITY = "- 可以使用 ask_user 向顾客提问"  # the observation line while ask_user is offered
# ``]`` followed (optionally after one separator) by another action: ``ask_user[a] ask_user[b]``.
_CHAINED = chained_actions(TOOL_NAMES)


def dialogue_lines(dialogue: Mapping[str, Any]) -> str:
    """The dialogue part of the observation text (appended after the page)."""
    asked, limit = dialogue.get("questions_asked", 0), dialogue.get("max_questions", 0)
    if dialogue.get("ask_user_available"):
        return f"\n对话：\n{ASK_USER_CAPABILITY}（已提问 {asked}/{limit} 次）\n"
    return f"\n对话：\n- 提问次数已用完（已提问 {asked}/{limit} 次）\n"


def render_dialogue_observation(state: Mapping[str, Any]) -> str:
    """The page text (``shopping-observation-v7``) followed by the dialogue lines on non-terminal pages."""
    text = render_observation(state)
    dialogue = state.get("dialogue")
    if isinstance(dialogue, Mapping) and state.get("page_type") != TERMINAL:
        text += dialogue_lines(dialogue)
    return text


class DialogueSession(ShopSession):
    """One dialogue episode: a :class:`ShopSession` whose agent may also ask the shopper questions."""

    __slots__ = ("last_reply", "max_questions", "questions", "shopper")

    def __init__(self, *, shopper: Shopper, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shopper = shopper
        self.max_questions = shopper.config.max_questions
        self.questions = 0
        self.last_reply: str | None = None

    @property
    def ask_user_available(self) -> bool:
        return not self.done and self.page != TERMINAL and self.questions < self.max_questions

    def dialogue_state(self) -> dict[str, Any]:
        return {
            "dialogue_version": DIALOGUE_OBSERVATION_VERSION,
            "shopper": self.shopper.name,
            "questions_asked": self.questions,
            "max_questions": self.max_questions,
            "ask_user_available": self.ask_user_available,
        }

    def observation_state(self) -> dict[str, Any]:
        state = super().observation_state()
        state["dialogue"] = self.dialogue_state()
        return state

    def observe(self) -> tuple[str, dict[str, Any]]:
        state = self.observation_state()
        return render_dialogue_observation(state), state

    def step(self, action: object) -> dict[str, Any]:
        self.last_reply = None
        before = self.action_count
        try:
            return super().step(action)
        except ShopperCallError:  # the LLM shopper failed: the step did not happen (the caller may retry it)
            self.action_count = before
            raise

    def _result(self, feedback: Mapping[str, Any] | None) -> dict[str, Any]:
        result = super()._result(feedback)
        dialogue = self.dialogue_state()
        if self.done:
            revealed, total = self.shopper.slot_recall()
            dialogue["slots_revealed"], dialogue["slots_total"] = revealed, total
        result["dialogue"] = dialogue
        result["shopper_reply"] = self.last_reply
        return result

    def _apply(self, action: object) -> dict[str, Any]:
        parsed = act.parse_action(action)
        if not parsed.ok or (parsed.name or "").casefold() != ASK_USER_TOOL:
            return super()._apply(action)
        shown = action if isinstance(action, str) else repr(action)
        question = parsed.argument
        if question is None or not question.strip():
            return act.feedback(shown, False, act.EMPTY_ARGUMENT, MSG_EMPTY_QUESTION)
        if len(question) > MAX_QUESTION_CHARS:
            return act.feedback(shown, False, QUESTION_TOO_LONG, MSG_QUESTION_TOO_LONG)
        if _CHAINED.search(question) is not None:
            return act.feedback(shown, False, act.MULTIPLE_ACTIONS, MSG_MULTIPLE)
        if self.questions >= self.max_questions:
            return act.feedback(shown, False, ASK_USER_UNAVAILABLE, MSG_ASK_USER_UNAVAILABLE)
        reply = self.shopper.reply(question.strip()).text  # may raise ShopperCallError: nothing counted yet
        self.questions += 1
        self.last_reply = reply
        self.counters[ASK_USER_TOOL] += 1
        payload = act.feedback(shown, True, act.EXECUTED, REPLY_PREFIX + reply)
        payload["reply"] = reply
        return payload
