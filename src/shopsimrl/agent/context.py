"""The context policy for long episodes (docs/training.md, "Context policy"): one rule for the evaluation
runtime, the rollout core and every training adapter.

Observations are 1–1.5k tokens each, so a 30-turn episode can outgrow a model's context (the reference run's
24,576 tokens) before its action limit. The rule: an episode has a context budget; when the next prompt would
leave fewer than ``reserve`` tokens of it for the answer, the prompt is not sent and the episode ends with
``terminate("generation_length")``; it is scored like any other ending, never dropped. Its record says so
(:func:`context_record`: the budget, the policy's name, how the prompt was measured, whether it ended the episode).

The rollout core measures prompts exactly (the chat template's token ids, :data:`MEASURE_TOKENS`); the
evaluation runtime talks to a chat API whose tokenizer it does not know, so it uses :func:`estimate_tokens`
(:data:`MEASURE_ESTIMATE`), an upper estimate so that a served model's own limit is not reached first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_CONTEXT_BUDGET = 24576  # the reference run's context (prompt plus everything generated)
DEFAULT_CONTEXT_RESERVE = 256  # tokens of the budget a prompt must leave for the answer
CONTEXT_POLICY = "end_scored_generation_length"
MEASURE_TOKENS = "chat_template_tokens"
# ASCII characters count a third of a token each, every other character (CJK text, symbols) one token, over the
# compact JSON of the messages and the tools offered (the template's own markup is small beside it)
MEASURE_ESTIMATE = "estimate_v1:ascii_chars/3+non_ascii_chars"
ASCII_CHARS_PER_TOKEN = 3


def reserve_for(budget: int, reserve: int = DEFAULT_CONTEXT_RESERVE) -> int:
    """The tokens a prompt must leave free: ``reserve``, at most half of a small budget."""
    return min(reserve, budget // 2)


def context_exceeded(prompt_tokens: int, budget: int | None, reserve: int = DEFAULT_CONTEXT_RESERVE) -> bool:
    """True when a prompt of ``prompt_tokens`` would leave less than the reserve of ``budget`` (None: no budget)."""
    return budget is not None and prompt_tokens + reserve_for(budget, reserve) > budget


def estimate_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> int:
    """An upper estimate of a chat prompt's tokens (:data:`MEASURE_ESTIMATE`), in linear time."""
    text = json.dumps([list(messages), list(tools)], ensure_ascii=False, separators=(",", ":"), default=str)
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // ASCII_CHARS_PER_TOKEN) + len(text) - ascii_chars


def context_record(budget: int | None, reserve: int, measure: str, *, ended: bool,
                   prompt_tokens: int | None = None, turn: int | None = None) -> dict[str, Any]:
    """The trace's ``context`` block: the budget, the policy, the measure and whether it ended the episode."""
    out: dict[str, Any] = {"context_budget": budget, "context_reserve": reserve, "context_policy": CONTEXT_POLICY,
                           "context_measure": measure, "context_ended": ended}
    if ended:
        out["context_overflow"] = {"prompt_tokens": prompt_tokens, "turn": turn}
    return out
