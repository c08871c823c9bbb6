"""Built-in policies as a chat model: they answer with the same chat-completion JSON a server would send.

The context is rebuilt from the chat messages with :func:`context_from_messages`, exactly as the policy server
does, so an in-process run and a run through ``shopsimrl policy-server`` see the same inputs and give the same
actions. Usage figures count characters (there is no tokenizer); ids are content hashes, so runs are
reproducible byte for byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..env.shop_env import ShopWorld
from .policies import REGISTRY, make_policy
from .policy import Policy, PolicyAction, context_from_messages
from .validation import ModelOutput, interpret

SOLVABILITY_NOTE = "oracle: reads the private goal; a solvability check of the catalog, not a baseline"


def policy_label(name: str) -> str:
    """How a built-in policy is named in tables and reports (the oracle is always marked)."""
    spec = REGISTRY.get(name)
    return spec.label if spec is not None else name


def _chars(messages: Sequence[Mapping[str, Any]]) -> int:
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            total += len(str(function.get("arguments", ""))) + len(str(function.get("name", "")))
    return total


def action_completion(
    action: PolicyAction, messages: Sequence[Mapping[str, Any]], *, model: str
) -> dict[str, Any]:
    """The chat-completion JSON for one policy action (one tool call, reasoning in ``reasoning_content``)."""
    arguments = json.dumps(dict(action.arguments), ensure_ascii=False)
    first_user = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    digest = hashlib.sha256(f"{model}\x00{first_user}\x00{len(messages)}\x00{action.name}\x00{arguments}".encode())
    hexdigest = digest.hexdigest()
    prompt_chars = _chars(messages)
    completion_chars = len(action.reasoning) + len(arguments) + len(action.name)
    return {
        "id": f"chatcmpl-{hexdigest[:24]}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": action.reasoning or None,
                "tool_calls": [{
                    "id": f"call_{hexdigest[24:48]}",
                    "type": "function",
                    "function": {"name": action.name, "arguments": arguments},
                }],
            },
            "finish_reason": "tool_calls",
        }],
        "usage": {"prompt_tokens": prompt_chars, "completion_tokens": completion_chars,
                  "total_tokens": prompt_chars + completion_chars},
    }


def policy_action(
    policy: Policy, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
    seed: int = 0, task_id: int | None = None,
) -> PolicyAction:
    context = context_from_messages(messages, tools, seed=seed)
    if task_id is not None:
        context = dataclasses.replace(context, task_id=task_id)
    return policy.act(context)


class BuiltinPolicyModel:
    """The model backend for ``--policy NAME``: calls the policy in-process, answers in the wire format."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.model_name = f"builtin:{policy.name}"

    @classmethod
    def named(cls, name: str, world: ShopWorld) -> BuiltinPolicyModel:
        return cls(make_policy(name, world))

    def identity(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": "builtin", "policy": self.policy.name, "model": self.model_name,
                               "label": policy_label(self.policy.name)}
        if self.policy.name == "oracle":
            out["note"] = SOLVABILITY_NOTE
        weights = getattr(self.policy, "weights_sha256", None)
        if isinstance(weights, str):  # a trained policy: which weights played (a resumed run must use the same)
            out["weights_sha256"] = weights
        return out

    async def generate(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
        seed: int = 0, task_id: int | None = None,
    ) -> ModelOutput:
        started = time.perf_counter()
        action = policy_action(self.policy, messages, tools, seed=seed, task_id=task_id)
        payload = action_completion(action, messages, model=self.model_name)
        return interpret(payload, tools, latency_ms=round((time.perf_counter() - started) * 1000, 3))

    async def close(self) -> None:
        return None
