"""A scripted generate function for any Hugging Face chat template (tests, benchmarks, CPU recipe checks).

A real engine cannot run here, and a random tiny model never emits a tool call, so multi-turn training
paths would go untested. :class:`TemplatePolicyGenerate` answers a prompt the way a model that follows the
template would: a built-in policy picks the action from the conversation and the page's tools (the
:class:`~shopsimrl.train.rollout.TurnRequest` the rollout passes to ``generate``), and the sampled text is the template's own render of that
assistant tool call, cut after the end-of-turn token (or with the family's stop token appended when the
template leaves the turn open, as GLM does). ``noncanonical=True`` samples one token per character instead
of the tokenizer's merges, which is what makes retokenization drift visible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..train.chat_template import KNOWN_STOPS, encode, render_text
from ..train.rollout import FINISH_LENGTH, FINISH_STOP, Generation, TurnRequest

_PROBE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
# GLM-4-MoE leaves the assistant turn open: the model stops by emitting the next message's role token
OPEN_TURN_STOPS = {"call": "<|observation|>", "text": "<|user|>"}


class TemplatePolicyGenerate:
    """``generate(prompt_ids)`` whose text is a policy's action as the chat template renders it."""

    def __init__(self, tokenizer: Any, policy: Any, *, tools: Sequence[Mapping[str, Any]] | None = None,
                 log_prob: float = -0.25, seed: int = 0, noncanonical: bool = False,
                 text_turns: Callable[[int], str | None] | None = None, max_new_tokens: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.policy = policy
        self.tools = list(tools) if tools is not None else None
        self.log_prob = log_prob
        self.seed = seed
        self.noncanonical = noncanonical
        self.text_turns = text_turns  # call index → visible text to emit instead of a call (repair paths)
        self.max_new_tokens = max_new_tokens
        self.calls = 0
        self._cache: dict[tuple[str, str], str] = {}

    def turn_text(self, message: Mapping[str, Any]) -> str:
        """The sampled text of one assistant message: the template's render of it, to its end-of-turn token."""
        import json

        key = (json.dumps(message, ensure_ascii=False, sort_keys=True), "")
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        from ..train.chat_template import episode_tools

        tools = self.tools if self.tools is not None else episode_tools()
        asked = render_text(self.tokenizer, _PROBE, tools, add_generation_prompt=True)
        head = render_text(self.tokenizer, [*_PROBE, dict(message)], tools, add_generation_prompt=False)
        from ..train.template_probe import assistant_turn

        turn = assistant_turn(asked, head, render_text(self.tokenizer, _PROBE, tools, add_generation_prompt=False))
        cuts = [turn.index(stop) + len(stop) for stop in KNOWN_STOPS if stop in turn]
        turn = turn[: min(cuts)] if cuts else turn + OPEN_TURN_STOPS["call" if message.get("tool_calls") else "text"]
        self._cache[key] = turn
        return turn

    def text_for(self, request: TurnRequest) -> str:
        from ..agent.builtin_backend import policy_action

        messages, tools = request.messages, request.tools
        custom = self.text_turns(self.calls) if self.text_turns is not None else None
        if custom is not None:
            return self.turn_text({"role": "assistant", "content": custom})
        action = policy_action(self.policy, messages, tools, seed=self.seed + self.calls)
        call = {"id": "call-0", "type": "function",
                "function": {"name": action.name, "arguments": dict(action.arguments)}}
        return self.turn_text({"role": "assistant", "content": None, "tool_calls": [call]})

    def token_ids(self, text: str) -> list[int]:
        if not self.noncanonical:
            return encode(self.tokenizer, text)
        specials = set(getattr(self.tokenizer, "get_added_vocab", dict)())
        ids: list[int] = []
        i = 0
        while i < len(text):
            special = next((s for s in specials if text.startswith(s, i)), None)
            piece = special or text[i]
            ids.extend(encode(self.tokenizer, piece))
            i += len(piece)
        return ids

    def __call__(self, request: TurnRequest) -> Generation:
        text = self.text_for(request)
        self.calls += 1
        ids = self.token_ids(text)
        finish = FINISH_STOP
        if self.max_new_tokens is not None and len(ids) > self.max_new_tokens:
            ids, finish = ids[: self.max_new_tokens], FINISH_LENGTH
        return Generation(ids, [self.log_prob] * len(ids), finish)
