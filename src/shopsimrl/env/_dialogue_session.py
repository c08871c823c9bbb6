"""A dialogue-mode episode: the page state machine plus ``ask_user[question]`` and a shopper.

The tool itself (its checks and feedback) is ``env/tools/ask_user.py``; this session holds the shopper and the
question count it reads, adds the ``dialogue`` block to the state and ``shopper_reply`` to each step result.
Every other action behaves exactly as in :class:`ShopSession`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract import ASK_USER_TOOL, TERMINAL
from ..errors import ShopperCallError
from ..versions import DIALOGUE_OBSERVATION_VERSION
from ._observation import render_dialogue_observation
from ._session import ShopSession
from .shoppers import Shopper


class DialogueSession(ShopSession):
    """One dialogue episode: a :class:`ShopSession` whose agent may also ask the shopper questions."""

    __slots__ = ("last_reply", "max_questions", "questions", "shopper")
    dialogue = True

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

    # ----------------------------------------------------------------- what ask_user calls (env/tools/ask_user.py)
    @property
    def conversation(self) -> DialogueSession:
        return self  # the shopper is this session's (Conversation: questions_left, ask)

    def questions_left(self) -> int:
        return self.max_questions - self.questions

    def ask(self, question: str) -> str:
        """The shopper's reply to one question (may raise ShopperCallError before anything is counted)."""
        reply = self.shopper.reply(question).text
        self.questions += 1
        self.last_reply = reply
        self.counters[ASK_USER_TOOL] += 1
        return reply
