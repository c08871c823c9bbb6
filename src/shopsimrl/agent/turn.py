"""The one definition of a model turn (docs/contract.md#runtime-turn-rules, #model-client): validation outcome → what happens next.

The agent runtime, the training rollout core and every trainer adapter call :func:`decide_turn` on a parsed
:class:`ModelOutput` and apply the :class:`TurnDecision` it returns, so the rules live here only:

- a cut-off generation without one complete call (``policy_failure``) ends the episode with
  ``terminate("generation_length")``;
- a protocol error gets a repair turn: the rejected output is echoed, then the feedback (one ``tool`` message
  per echoed call, else one ``user`` message); no environment action, the turn still counts;
- a valid call becomes the canonical action; its observation comes back as one ``tool`` message;
- running out of turns ends the episode with ``terminate("action_limit")`` (:data:`ACTION_LIMIT`).

A new tool (e.g. dialogue mode's ``ask_user``) is added by extending the validator's tool table and, if it
needs a different continuation, a new ``kind`` here. Tool-call arguments stay objects (``dict``) in the
history when ``arguments="object"`` (what chat templates expect); :func:`wire_messages` serialises them to the
JSON strings the OpenAI wire format wants.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..contract import ACTION_LIMIT as ACTION_LIMIT
from ..contract import GENERATION_LENGTH
from .validation import ModelOutput, feedback_text, protocol_feedback

ACT, REPAIR, TERMINATE = "act", "repair", "terminate"
ArgumentStyle = Literal["object", "json"]


@dataclass(frozen=True)
class TurnDecision:
    """What one model output does to the episode (``kind``) and the history messages it adds."""

    kind: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    action: str | None = None
    call_id: str | None = None
    termination: str | None = None
    feedback: dict[str, Any] | None = None


def _arguments(raw: Any, style: ArgumentStyle) -> Any:
    if style == "json":
        return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return raw  # a malformed echo stays as the model wrote it
    return parsed if isinstance(parsed, dict) else raw


def _call(call: Mapping[str, Any], style: ArgumentStyle) -> dict[str, Any]:
    function = call.get("function") or {}
    return {"id": call.get("id"), "type": "function",
            "function": {"name": function.get("name", ""), "arguments": _arguments(function.get("arguments"), style)}}


def decide_turn(out: ModelOutput, tools: Sequence[Mapping[str, Any]], *,
                arguments: ArgumentStyle = "json") -> TurnDecision:
    """Apply the turn rules to one validated model output."""
    if out.policy_failure is not None:
        return TurnDecision(TERMINATE, termination=GENERATION_LENGTH)
    if out.protocol_error is not None:
        feedback = protocol_feedback(out.protocol_error, tools)
        text = feedback_text(feedback)
        visible = out.content if out.content is not None and out.content.strip() else None
        messages: list[dict[str, Any]] = []
        if out.wire_calls:
            calls = [_call(c, arguments) for c in out.wire_calls]
            messages.append({"role": "assistant", "content": visible, "tool_calls": calls})
            messages.extend({"role": "tool", "tool_call_id": c["id"], "content": text} for c in calls)
        else:
            if visible is not None:
                messages.append({"role": "assistant", "content": visible})
            messages.append({"role": "user", "content": text})
        return TurnDecision(REPAIR, messages=messages, feedback=feedback)
    call = _call(out.call.wire(), arguments)
    return TurnDecision(ACT, messages=[{"role": "assistant", "content": None, "tool_calls": [call]}],
                        action=out.canonical_action(), call_id=call["id"])


def observation_message(decision: TurnDecision, observation: str) -> dict[str, Any]:
    """The ``tool`` message that carries an action's observation back."""
    return {"role": "tool", "tool_call_id": decision.call_id, "content": observation}


def wire_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The history as the OpenAI wire format wants it: tool-call arguments as JSON strings."""
    out: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            out.append({**message, "tool_calls": [_call(c, "json") for c in calls]})
        else:
            out.append(dict(message))
    return out
