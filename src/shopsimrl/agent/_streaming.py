"""Chat completions as server-sent events (``stream=true``), and the reverse: chunks folded back into one answer.

Clients such as ``vf-eval`` only speak the streaming protocol, so the policy server turns each finished
completion (after any injected fault) into the chunk sequence an OpenAI-compatible server sends: a role delta,
reasoning and content deltas, tool-call deltas (id, type and name first, then the arguments in pieces), a final
chunk with ``finish_reason``, an optional usage chunk and ``data: [DONE]``. :func:`fold_chunks` is the inverse,
used by the model client's streaming path so a streamed answer goes through the same validator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

ARGUMENT_PIECE = 16  # characters of tool-call arguments per delta: several deltas, as real servers send


def _chunk(completion: Mapping[str, Any], delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": completion["id"], "object": "chat.completion.chunk", "created": completion.get("created", 0),
        "model": completion["model"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def completion_chunks(completion: Mapping[str, Any], *, include_usage: bool = False) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one (single-choice) completion, in wire order."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    yield _chunk(completion, {"role": "assistant", "content": ""})
    reasoning = message.get("reasoning_content")
    if reasoning:
        yield _chunk(completion, {"reasoning_content": reasoning})
    content = message.get("content")
    if content:
        yield _chunk(completion, {"content": content})
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        head = {"index": index, "id": call.get("id"), "type": call.get("type", "function"),
                "function": {"name": function.get("name"), "arguments": ""}}
        yield _chunk(completion, {"tool_calls": [head]})
        arguments = str(function.get("arguments") or "")
        for start in range(0, len(arguments), ARGUMENT_PIECE):
            piece = arguments[start : start + ARGUMENT_PIECE]
            yield _chunk(completion, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield _chunk(completion, {}, choice.get("finish_reason") or "stop")
    if include_usage:
        last = _chunk(completion, {})
        last["choices"] = []
        last["usage"] = dict(completion.get("usage") or {})
        yield last


def sse_events(chunks: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """``data: <json>`` events separated by blank lines, ended by ``data: [DONE]``."""
    for chunk in chunks:
        yield b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8") + b"\n\n"
    yield b"data: [DONE]\n\n"


def fold_chunks(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Rebuild the ``chat.completion`` a stream of chunks describes (first choice; tool calls joined by index)."""
    out: dict[str, Any] = {"id": None, "object": "chat.completion", "created": 0, "model": None, "usage": None}
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    for chunk in chunks:
        out["id"] = out["id"] or chunk.get("id")
        out["model"] = out["model"] or chunk.get("model")
        out["created"] = chunk.get("created") or out["created"]
        if chunk.get("usage"):
            out["usage"] = dict(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for key in ("reasoning_content", "reasoning"):
                if delta.get(key):
                    reasoning.append(delta[key])
            for part in delta.get("tool_calls") or ():
                call = calls.setdefault(int(part.get("index") or 0),
                                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if part.get("id"):
                    call["id"] = part["id"]
                function = part.get("function") or {}
                if function.get("name"):
                    call["function"]["name"] += function["name"]
                if function.get("arguments"):
                    call["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    message: dict[str, Any] = {
        "role": "assistant", "content": "".join(content) or None,
        "reasoning_content": "".join(reasoning) or None,
        "tool_calls": [calls[i] for i in sorted(calls)] or None,
    }
    out["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    if out["usage"] is None:
        del out["usage"]
    return out
