"""The policy server's scripted shopper (``policy-server --policy rule-shopper``): chat completions answered by
the rule shopper, so the LLM shopper can be tested end to end without a model.

A request is what :class:`~shopsimrl.dialogue.llm_shopper.LLMShopper` sends: the shopper system prompt, the
harness's ``请提供您的购物需求。``, then the opening and each question with its reply. The task is recovered
from the instruction in the system prompt (the first active task with that instruction text); a fresh rule
shopper replays the earlier questions to rebuild what it has revealed and answers the last one. The reply is a
plain assistant message (``finish_reason: "stop"``). Faults for tests: ``shopsim_fault`` in the body, or
``shopsim_fault_script`` keyed by the question index (``"0"``: the opening).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..dialogue.config import ShopperConfig
from ..dialogue.llm_prompt import OPENING_REQUEST, task_instruction
from ..dialogue.rule_shopper import RuleShopper
from ..env.shop_env import ShopWorld
from ..errors import PolicyError

SHOPPER_POLICY = "rule-shopper"
SHOPPER_FAULTS = ("http_500", "http_500_once", "http_429_once", "empty_reply")


def question_index(messages: Sequence[Mapping[str, Any]]) -> int:
    """0 for the opening request, k for the k-th question (one assistant message per earlier answer)."""
    return sum(1 for message in messages if message.get("role") == "assistant")


class ScriptedShopper:
    """Answers shopper conversations with the rule shopper of the task the system prompt describes."""

    def __init__(self, world: ShopWorld) -> None:
        self.world = world
        self._by_instruction: dict[str, int] | None = None

    def _task(self, instruction: str) -> int:
        if self._by_instruction is None:
            index: dict[str, int] = {}
            for task_id, goal in sorted(self.world.catalog.goals.items()):
                index.setdefault(str(goal.get("instruction_text") or ""), int(task_id))
            self._by_instruction = index
        found = self._by_instruction.get(instruction)
        if found is None:
            raise PolicyError("no task of this catalog has the instruction in the shopper prompt", code="shopper_script")
        return found

    def reply(self, messages: Sequence[Mapping[str, Any]], *, seed: int = 0) -> str:
        """The rule shopper's reply to the last user message of ``messages``."""
        system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
        instruction = task_instruction(system) if isinstance(system, str) else None
        if instruction is None:
            raise PolicyError("the first message must be the shopper system prompt with its purchase goal", code="shopper_script")
        turns = [m for m in messages if m.get("role") != "system"]
        if not turns or turns[0].get("role") != "user" or turns[0].get("content") != OPENING_REQUEST:
            raise PolicyError(f"the conversation must start with the user message {OPENING_REQUEST!r}", code="shopper_script")
        if turns[-1].get("role") != "user" or any(
            m.get("role") != ("user" if i % 2 == 0 else "assistant") for i, m in enumerate(turns)
        ):
            raise PolicyError("user and assistant messages must alternate and end with a user message", code="shopper_script")
        goal = self.world.catalog.goal(self._task(instruction))
        product = self.world.catalog.products_by_asin.get(goal["asin"])
        shopper = RuleShopper(goal, product.raw if product is not None else None, ShopperConfig(sample_seed=seed))
        questions = [str(m.get("content") or "") for m in turns[2::2]]
        if not questions:
            return shopper.opening()
        for question in questions[:-1]:
            shopper.reply(question)
        return shopper.reply(questions[-1]).text


def text_completion(text: str, messages: Sequence[Mapping[str, Any]], *, model: str) -> dict[str, Any]:
    """A plain chat completion carrying ``text`` (ids are content hashes; usage counts characters)."""
    prompt = sum(len(str(m.get("content") or "")) for m in messages)
    digest = hashlib.sha256(f"{model}\x00{len(messages)}\x00{text}".encode()).hexdigest()
    return {
        "id": f"chatcmpl-{digest[:24]}", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(text), "total_tokens": prompt + len(text)},
    }
