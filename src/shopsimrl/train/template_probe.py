"""The tool-call probe every adapter runs before its first episode: no silent zero-reward training.

A chat template that renders no tool call (it drops ``tool_calls`` from assistant messages), or renders one in
a format the project's parsers cannot read back, would train on reward 0 with every turn a protocol error and
no error anywhere. :func:`check_template` renders one ``search`` call through the template, exactly as a
sampled turn would look, parses it back with the rollout core's own parser and refuses the template with
:class:`RolloutError` (`template_unreadable`) (naming the template and what it lacks) unless the call comes back intact.
The result is cached on the tokenizer, so the probe runs once per tokenizer.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

from ..contract import SEARCH_TOOL
from ..errors import RolloutError
from ._turn_text import parse_turn
from .chat_template import KNOWN_STOPS, episode_tools, prepare_tokenizer, render_text

PROBE_QUERY = "probe query"
_CALL = {"id": "call-0", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": {"query": PROBE_QUERY}}}
_HEAD = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def template_name(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    digest = hashlib.sha256(str(template).encode()).hexdigest()[:12]
    return f"{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__} (chat template sha256 {digest}…)"


def probe_turn(tokenizer: Any) -> tuple[str, str]:
    """(the generation prompt's tail, the assistant turn carrying one probe call as the template renders it)."""
    tools = episode_tools()
    asked = render_text(tokenizer, _HEAD, tools, add_generation_prompt=True)
    head = render_text(tokenizer, [*_HEAD, {"role": "assistant", "content": None, "tool_calls": [_CALL]}], tools,
                       add_generation_prompt=False)
    return asked[-200:], assistant_turn(asked, head, render_text(tokenizer, _HEAD, tools, add_generation_prompt=False))


def assistant_turn(asked: str, head: str, plain: str) -> str:
    """The assistant turn in ``head`` (the conversation with it) given ``asked`` (the generation prompt) and
    ``plain`` (the conversation without either): after the prompt when it is a prefix; else after the last
    occurrence of the generation prompt's own text (a template that re-renders an earlier block); else after
    the part both share (a generation prompt that opens a think block the history does not show)."""
    if head.startswith(asked):
        return head[len(asked):]
    opener = asked[len(plain):] if asked.startswith(plain) else ""
    if opener and opener in head:
        return head[head.rindex(opener) + len(opener):]
    shared = next((i for i, (a, b) in enumerate(zip(asked, head, strict=False)) if a != b), min(len(asked), len(head)))
    return head[shared:]


def check_template(tokenizer: Any, *, training_template: str = "auto") -> None:
    """Refuse a template whose tool calls the rollout core cannot read back (cached per tokenizer)."""
    info = prepare_tokenizer(tokenizer, training_template=training_template)
    verdict = getattr(tokenizer, "_shopsimrl_probe", None)
    if verdict is None:
        verdict = _probe(tokenizer)
        with contextlib.suppress(AttributeError):
            tokenizer._shopsimrl_probe = verdict
    if verdict:
        note = f" ({info.note})" if info.note else ""
        raise RolloutError(f"chat template of {template_name(tokenizer)}{note} {verdict}; training "
                                      "with it would score every turn as a protocol error (reward 0)", code="template_unreadable")


def _probe(tokenizer: Any) -> str:
    """'' when a rendered probe call parses back to the same action, else what the template lacks."""
    try:
        tail, turn = probe_turn(tokenizer)
    except Exception as exc:
        return f"cannot render a conversation with a tool call ({type(exc).__name__}: {exc})"
    if PROBE_QUERY not in turn:
        return "renders no tool call: the assistant message's tool_calls do not appear in the text"
    cuts = [turn.index(stop) + len(stop) for stop in KNOWN_STOPS if stop in turn]
    raw = turn[: min(cuts)] if cuts else turn
    text = raw
    for stop in KNOWN_STOPS:
        text = text.rstrip()
        if text.endswith(stop):
            text = text[: -len(stop)]
    out = parse_turn(tokenizer, raw, text, lambda: tail, "stop", episode_tools())
    if out.accepted and out.canonical_action() == f"{SEARCH_TOOL}[{PROBE_QUERY}]":
        return ""
    code = (out.protocol_error or out.policy_failure or {}).get("code", "a different action")
    return (f"renders tool calls in a format the project cannot read back ({code}): {raw[:120]!r}; supported: "
            "<tool_call> JSON or Qwen XML, Llama 3.1 JSON, GLM XML, gpt-oss harmony, Gemma 4, LFM2 (tool_formats)")
