"""The built-in policy interface: what a policy sees each turn and what it answers.

A built-in policy sees exactly what a chat model sees — the visible task, the public persona, the current
observation text, the offered tools and the earlier turns — so the same policy gives the same actions
whether it is called in-process by the runtime or behind the OpenAI-compatible ``policy-server`` (where the
context is rebuilt from the chat messages by :func:`context_from_messages`). Policies are stateless: every
decision is a function of the context, which keeps them deterministic and resumable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..contract import CLICK_TOOL, QUERY_ARGUMENT, SEARCH_TOOL, VALUE_ARGUMENT, format_action
from ..env.tools import action_of_call, argument_key
from ..errors import ShopSimError

PERSONA_HEADER = "用户个人文档："
TASK_HEADER = "购物任务："


class PolicyError(ShopSimError):
    """A policy cannot act on this context (no tool offered, an unknown task, malformed messages)."""


@dataclass(frozen=True)
class Turn:
    """One earlier environment action and the observation it produced."""

    action: str
    observation: str


@dataclass(frozen=True)
class PolicyContext:
    """Everything a policy may use to choose the next action (public information only, plus ``task_id``).

    ``task_id`` is known in-process; behind the policy server it is ``None`` and a policy that needs it
    (only the oracle) resolves the task from the visible instruction and the persona.
    """

    instruction: str
    observation: str
    tools: Sequence[Mapping[str, Any]]
    persona: Mapping[str, Any] = field(default_factory=dict)
    history: Sequence[Turn] = ()
    task_id: int | None = None
    seed: int = 0

    def offered(self) -> dict[str, Mapping[str, Any]]:
        """Offered tools by name."""
        out: dict[str, Mapping[str, Any]] = {}
        for tool in self.tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                out[function["name"]] = function
        return out

    def click_values(self) -> list[str]:
        """The click enum of this turn ([] when click is not offered)."""
        function = self.offered().get(CLICK_TOOL)
        if function is None:
            return []
        enum = function.get("parameters", {}).get("properties", {}).get(VALUE_ARGUMENT, {}).get("enum", [])
        return [str(value) for value in enum]

    @property
    def search_offered(self) -> bool:
        return SEARCH_TOOL in self.offered()


@dataclass(frozen=True)
class PolicyAction:
    """One tool call: ``search`` with ``{"query": …}``, ``click`` with ``{"value": …}`` or (dialogue mode)
    ``ask_user`` with ``{"question": …}``."""

    name: str
    arguments: Mapping[str, str]
    reasoning: str = ""

    @classmethod
    def search(cls, query: str, reasoning: str = "") -> PolicyAction:
        return cls(SEARCH_TOOL, {QUERY_ARGUMENT: query}, reasoning)

    @classmethod
    def click(cls, value: str, reasoning: str = "") -> PolicyAction:
        return cls(CLICK_TOOL, {VALUE_ARGUMENT: value}, reasoning)

    @property
    def canonical(self) -> str:
        """The environment's action string for this call."""
        key = argument_key(self.name) or VALUE_ARGUMENT
        return format_action(self.name, self.arguments.get(key, ""))


@runtime_checkable
class Policy(Protocol):
    """A built-in policy: a name and a pure ``act`` function."""

    name: str

    def act(self, context: PolicyContext) -> PolicyAction: ...


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _is_protocol_feedback(text: str) -> bool:
    if not text.startswith("{"):  # observations are page text; only feedback is JSON
        return False
    try:
        payload = json.loads(text)
    except (ValueError, TypeError):
        return False
    return isinstance(payload, dict) and payload.get("type") == "tool_protocol_error"


def _canonical_from_call(call: Mapping[str, Any]) -> str | None:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return None
    name = function.get("name")
    raw = function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    if not isinstance(arguments, Mapping):
        return None
    return action_of_call(name, arguments)


def context_from_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *, seed: int = 0
) -> PolicyContext:
    """Rebuild a :class:`PolicyContext` from the runtime's chat messages (docs/contract.md#runtime-prompt).

    The persona is the JSON line after ``用户个人文档：`` in the system message; the task is the first user
    message after ``购物任务：``; each executed tool call and the ``tool`` message answering it form one
    :class:`Turn`; protocol-error feedback is skipped (no environment action happened).
    """
    persona: dict[str, Any] = {}
    instruction: str | None = None
    observation = ""
    history: list[Turn] = []
    pending: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, Mapping):
            raise PolicyError("every chat message must be an object")
        role = message.get("role")
        text = _content_text(message.get("content"))
        if role == "system" and PERSONA_HEADER in text:
            line = text.split(PERSONA_HEADER, 1)[1].lstrip("\n").split("\n", 1)[0]
            try:
                loaded = json.loads(line)
            except ValueError as exc:
                raise PolicyError(f"the persona line of the system message is not JSON: {exc}") from exc
            persona = loaded if isinstance(loaded, dict) else {}
        elif role == "user" and instruction is None:
            body = text.split(TASK_HEADER, 1)[1].lstrip("\n") if TASK_HEADER in text else text
            instruction, _, observation = body.partition("\n\n")
        elif role == "assistant":
            for call in message.get("tool_calls") or []:
                canonical = _canonical_from_call(call)
                if canonical is not None and isinstance(call.get("id"), str):
                    pending[call["id"]] = canonical
        elif role == "tool":
            action = pending.pop(str(message.get("tool_call_id")), None)
            if action is not None and not _is_protocol_feedback(text):
                history.append(Turn(action, text))
                observation = text
    if instruction is None:
        raise PolicyError("no user message with the shopping task")
    return PolicyContext(
        instruction=instruction, observation=observation, tools=list(tools), persona=persona,
        history=tuple(history), seed=seed,
    )
