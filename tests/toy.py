"""A tiny deterministic chat tokenizer and a policy-driven generator, for the tests (test-only: not in the package).

The tokenizer is character-level with a ChatML-like template (``<|im_start|>role … <|im_end|>``) and renders
the tools into the system block, as Qwen templates do, so the rendered prefix changes whenever the tools
change — the case that makes the rollout core start a new segment. ``tools_in_prompt=False`` renders no
tools, so a canonical sample is an exact prefix of the next prompt (one segment per episode).

:class:`PolicyGenerate` stands in for the inference engine (which cannot run here): it answers prompt ids
with sampled ids, one log-prob per token and a finish reason — the real protocol — choosing the text with a
built-in policy. It finds the conversation behind a prompt in the tokenizer's render cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from shopsimrl.train.rollout import FINISH_LENGTH, FINISH_STOP, Generation, TurnRequest

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|pad|>"
SPECIALS = (PAD, IM_START, IM_END)
CHAR_OFFSET = len(SPECIALS)
_SPECIAL_IDS = {token: i for i, token in enumerate(SPECIALS)}
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIALS) + ")")


class ToyChatTokenizer:
    """Character-level tokenizer: special tokens 0–2, every other character ``ord(c) + 3``."""

    eos_token = IM_END
    pad_token = PAD
    eos_token_id = SPECIALS.index(IM_END)
    pad_token_id = SPECIALS.index(PAD)

    def __init__(self, *, tools_in_prompt: bool = True, cache_size: int = 4096) -> None:
        self.tools_in_prompt = tools_in_prompt
        self.cache_size = cache_size
        self.renders: dict[tuple[int, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        self.last: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None

    # -- text ⇄ ids
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        for piece in _SPECIAL_SPLIT.split(text):
            if piece in _SPECIAL_IDS:
                ids.append(_SPECIAL_IDS[piece])
            elif piece:
                ids.extend(ord(c) + CHAR_OFFSET for c in piece)
        return ids

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False, **_: Any) -> str:
        out = []
        for t in token_ids:
            t = int(t)
            if t < CHAR_OFFSET:
                if not skip_special_tokens:
                    out.append(SPECIALS[t])
            else:
                out.append(chr(t - CHAR_OFFSET))
        return "".join(out)

    # -- chat template
    @staticmethod
    def render_call(call: Mapping[str, Any]) -> str:
        function = call.get("function") or {}
        raw = function.get("arguments", "")
        try:
            arguments: Any = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw
        except ValueError:
            arguments = raw
        body = json.dumps({"name": function.get("name", ""), "arguments": arguments}, ensure_ascii=False)
        return f"<tool_call>{body}</tool_call>"

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = False) -> str:
        parts: list[str] = []
        rest = list(messages)
        system = ""
        if rest and rest[0].get("role") == "system":
            system = str(rest.pop(0).get("content") or "")
        if tools and self.tools_in_prompt:
            system += "\n\n# Tools\n" + "\n".join(json.dumps(t, ensure_ascii=False, sort_keys=True) for t in tools)
        if system:
            parts.append(f"{IM_START}system\n{system}{IM_END}\n")
        for message in rest:
            role = message.get("role")
            content = message.get("content") or ""
            if role == "assistant":
                text = str(content)
                calls = message.get("tool_calls") or []
                if calls:
                    text += "".join(self.render_call(call) for call in calls)
                parts.append(f"{IM_START}assistant\n{text}{IM_END}\n")
            elif role == "tool":
                parts.append(f"{IM_START}user\n<tool_response>{content}</tool_response>{IM_END}\n")
            else:
                parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
        if add_generation_prompt:
            parts.append(f"{IM_START}assistant\n")
        return "".join(parts)

    def apply_chat_template(self, conversation: Sequence[Mapping[str, Any]], tools: Any = None,
                            add_generation_prompt: bool = False, tokenize: bool = True, **_: Any) -> Any:
        text = self.render(conversation, tools, add_generation_prompt)
        if add_generation_prompt:  # the prompt the next generate call answers (append-mode prompts too)
            self.last = ([dict(m) for m in conversation], list(tools or []))
        if not tokenize:
            return text
        ids = self.encode(text)
        if len(self.renders) >= self.cache_size:
            self.renders.clear()
        self.renders[tuple(ids)] = ([dict(m) for m in conversation], list(tools or []))
        return ids

    def conversation_for(self, prompt_ids: Sequence[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The conversation a prompt was rendered from (else the latest generation prompt: append mode)."""
        found = self.renders.get(tuple(prompt_ids))
        if found is None:
            if self.last is None:
                raise KeyError("no conversation was rendered for this prompt")
            return self.last
        return found


def tool_call_text(name: str, arguments: Mapping[str, Any], reasoning: str = "") -> str:
    """The sampled text of one tool call, in the format the rollout core parses."""
    think = f"<think>{reasoning}</think>\n" if reasoning else ""
    return think + f"<tool_call>{json.dumps({'name': name, 'arguments': dict(arguments)}, ensure_ascii=False)}</tool_call>"


class PolicyGenerate:
    """A generate function backed by a built-in policy (a stand-in for SGLang/vLLM ``/generate``)."""

    def __init__(self, tokenizer: ToyChatTokenizer, policy: Any, *, reasoning: bool = False,
                 log_prob: float = -0.25, max_new_tokens: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.policy = policy
        self.reasoning = reasoning
        self.log_prob = log_prob
        self.max_new_tokens = max_new_tokens
        self.calls = 0

    def text_for(self, prompt_ids: Sequence[int]) -> str:
        from shopsimrl.agent.builtin_backend import policy_action

        messages, tools = self.tokenizer.conversation_for(prompt_ids)
        if isinstance(prompt_ids, TurnRequest) and prompt_ids.tools:  # the page's own tools (the render may show
            tools = list(prompt_ids.tools)                                # the episode's enum-free set)
        action = policy_action(self.policy, messages, tools, seed=self.calls)
        return tool_call_text(action.name, action.arguments, action.reasoning if self.reasoning else "")

    def __call__(self, prompt_ids: list[int]) -> Generation:
        self.calls += 1
        ids = [*self.tokenizer.encode(self.text_for(prompt_ids)), self.tokenizer.eos_token_id]
        finish = FINISH_STOP
        if self.max_new_tokens is not None and len(ids) > self.max_new_tokens:
            ids, finish = ids[: self.max_new_tokens], FINISH_LENGTH
        return Generation(ids, [self.log_prob] * len(ids), finish)
