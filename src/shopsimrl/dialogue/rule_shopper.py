"""The deterministic rule shopper: reveals its goal's slots only when asked, at most two per reply.

It knows the goal (instruction, attributes, options with their axes, budget), never the page or the gold
product's identity, and it never blocks a purchase: a proposal before every slot has been asked about gets
"not complete yet" and the missing kinds, and the agent decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..versions import RULE_SHOPPER_VERSION
from . import replies
from .config import ShopperConfig
from .lexicon import NEUTRAL, OPEN, PURCHASE, SLOTS, match_question, normalize
from .lexicon import OPEN_WORDS as _OPEN_WORDS
from .noise import plan_noise
from .slots import PRODUCT, Slot, build_slots

MAX_SLOTS_PER_REPLY = 2


@dataclass(frozen=True, slots=True)
class ShopperReply:
    """One answer: its text, the intent found, the slots it revealed (names) and the noise that acted."""

    text: str
    intent: str
    slots: tuple[str, ...] = ()
    noise_events: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"reply": self.text, "intent": self.intent, "slots": list(self.slots), "noise": list(self.noise_events)}


class RuleShopper:
    """One episode's shopper (mutable: it remembers which slots it has revealed)."""

    name = "rule"
    version = RULE_SHOPPER_VERSION

    def __init__(
        self,
        goal: Mapping[str, Any],
        product: Mapping[str, Any] | None,
        config: ShopperConfig | None = None,
    ) -> None:
        self.config = config or ShopperConfig()
        self.task_id = int(goal["task_id"])
        self.slots: tuple[Slot, ...] = build_slots(goal, product)
        self._noise = plan_noise(self.slots, self.config.noise, self.task_id, self.config.sample_seed)
        self.revealed: set[int] = {slot.index for slot in self.slots if slot.kind == PRODUCT}
        self.withheld: set[int] = set()
        self.turns = 0
        self.transcript: list[dict[str, Any]] = []

    @property
    def noun(self) -> str:
        return self.slots[0].value

    def opening(self) -> str:
        return replies.opening(self.noun, self.task_id)

    def missing(self) -> list[Slot]:
        """Slots not yet revealed, in slot order."""
        return [slot for slot in self.slots if slot.index not in self.revealed]

    def complete(self) -> bool:
        return not self.missing()

    def slot_recall(self) -> tuple[int, int]:
        """(revealed, total) slots; a slot asked about but withheld by noise is not revealed."""
        return len(self.revealed - self.withheld), len(self.slots)

    def reply(self, question: str) -> ShopperReply:
        """Answer one question (the caller bounds its length) and record it in the transcript."""
        answer = self._answer(question)
        self.turns += 1
        self.transcript.append({"question": question, **answer.as_dict()})
        return answer

    def _answer(self, question: str) -> ShopperReply:
        match = match_question(question, self.slots)
        intent = match.intent
        chosen: list[Slot] = []
        if intent == SLOTS:
            named = [self.slots[index] for index in match.slots]
            broad = [self.slots[index] for index in match.general]
            fresh = [slot for slot in named + broad if slot.index not in self.revealed]
            if not fresh and any(word in normalize(question) for word in _OPEN_WORDS):
                intent = OPEN
            else:
                # Named slots (unrevealed, then repeated); only without any, the slots asked about in general words.
                ordered = [slot for slot in named if slot.index not in self.revealed]
                ordered += [slot for slot in named if slot.index in self.revealed]
                if not ordered:
                    ordered = [slot for slot in broad if slot.index not in self.revealed] or broad
                chosen = ordered[:MAX_SLOTS_PER_REPLY]
        if intent == OPEN:
            chosen = self.missing()[:MAX_SLOTS_PER_REPLY]
            if not chosen:
                return ShopperReply(replies.ALL_SAID, OPEN)
        if intent == PURCHASE:
            missing = self.missing()
            if missing:
                return ShopperReply(replies.incomplete([slot.kind for slot in missing]), "purchase_incomplete")
            return ShopperReply(replies.PURCHASE_OK, "purchase_complete")
        if intent == NEUTRAL or not chosen:
            return ShopperReply(replies.NEUTRAL_REPLY, NEUTRAL)
        chosen.sort(key=lambda slot: slot.index)
        parts: list[str] = []
        events: list[str] = []
        for slot in chosen:
            noise = self._noise.get(slot.index)
            if noise is not None and noise.omit:
                parts.append(replies.OMITTED)
                self.withheld.add(slot.index)
            else:
                parts.append(replies.slot_text(slot, noise.phrase if noise and noise.phrase else slot.phrase))
            if noise is not None and slot.index not in self.revealed:
                events.append(noise.event)
            self.revealed.add(slot.index)
        text = replies.combine(list(dict.fromkeys(parts)), self.turns)
        return ShopperReply(text, intent, tuple(slot.name for slot in chosen), tuple(events))
