"""Response parsers for the tool-call formats of chat templates the validator cannot read from text.

The validator (``agent.validation``) reads ``<tool_call>`` blocks holding JSON or Qwen's XML. Other model families
write their calls in formats of their own, as their chat templates render them; these parsers read each back,
written from the formats' public descriptions, so that every environment (the main one with TRL, the ``[verl]``
one without it) reads the same templates the same way:

- Llama 3.1/3.2 JSON tool calls: the whole turn is ``{"name": …, "parameters": {…}}`` (optionally after
  ``<|python_tag|>``).
- GLM-4.5 XML: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>``; a value is the text
  itself for a string parameter, else JSON.
- gpt-oss harmony: messages ``<|start|>assistant[ to=functions.NAME]<|channel|>CHANNEL[ json]<|message|>…``
  ended by ``<|end|>``, ``<|call|>`` or ``<|return|>``; ``analysis`` is reasoning, a message to a function a call.
- Gemma 4: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,…}<tool_call|>``, thoughts in ``<|channel>…<channel|>``.
- LFM2: ``<|tool_call_start|>[name(key='text', …)]<|tool_call_end|>`` with Python-style values.

A template whose generation prompt opens a think block (Qwen3.5-think, Qwen3.6, Qwen3-8, Nemotron 3) needs no
format of its own: the sampled text's ``</think>`` closes the block the prompt opened (:func:`reopen_think`).

Each parser scans with ``str.find`` and a bounded recursive descent (``_literals``), so it runs in linear time
on any text, and raises nothing but :class:`DataError` (`response_format`) (tests/test_tool_formats.py: render → parse
back with every template of each family; arbitrary text).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataError as DataError
from ._literals import PYTHON, PYTHON_RAW, Dialect, scan_gemma_object, scan_python_calls, skip_space


@dataclass
class ParsedTurn:
    """What one sampled turn says: visible text, reasoning, and the calls as (name, arguments)."""

    content: str = ""
    reasoning: str | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)


Parser = Callable[[str, Sequence[Mapping[str, Any]]], ParsedTurn]


def _think(text: str, opened: str = "<think>", closed: str = "</think>") -> tuple[str | None, str]:
    """(reasoning, rest) when ``text`` opens with a think block, else (None, text)."""
    start = skip_space(text, 0)
    if not text.startswith(opened, start):
        return None, text
    end = text.find(closed, start + len(opened))
    if end < 0:
        raise DataError(f"an unclosed {opened} block", code="response_format")
    return text[start + len(opened):end].strip(), text[end + len(closed):]


def reopen_think(text: str, prompt_tail: str) -> str:
    """``text`` with the ``<think>`` its prompt opened put back, when the text closes that block."""
    if prompt_tail.rstrip().endswith("<think>"):
        close = text.find("</think>")
        if close >= 0 and "<think>" not in text[:close]:
            return "<think>" + text
    return text


def _json_call(body: str, where: str) -> tuple[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{where} is not JSON ({exc})", code="response_format") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise DataError(f"{where} is not an object with a name", code="response_format")
    return payload["name"], payload.get("parameters", payload.get("arguments", {}))


def parse_llama_json(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedTurn:
    """Llama 3.1/3.2: the turn is one JSON call object, or plain text."""
    body = text.strip()
    if body.startswith("<|python_tag|>"):
        body = body[len("<|python_tag|>"):].strip()
    if not body.startswith("{"):
        return ParsedTurn(content=text)
    return ParsedTurn(calls=[_json_call(body, "the tool call")])


def _parameter_types(tools: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, Mapping) and function.get("name") == name:
            properties = (function.get("parameters") or {}).get("properties") or {}
            return properties if isinstance(properties, Mapping) else {}
    return {}


def _glm_value(raw: str, schema: Any) -> Any:
    if isinstance(schema, Mapping) and schema.get("type") == "string":
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _glm_call(body: str, tools: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    first = body.find("<arg_key>")
    name = (body if first < 0 else body[:first]).strip()
    if not name:
        raise DataError("a GLM tool call without a function name", code="response_format")
    types = _parameter_types(tools, name)
    arguments: dict[str, Any] = {}
    i = len(body) if first < 0 else first
    while i < len(body):
        key_end = body.find("</arg_key>", i)
        open_value = body.find("<arg_value>", key_end) if key_end >= 0 else -1
        value_end = body.find("</arg_value>", open_value) if open_value >= 0 else -1
        if not body.startswith("<arg_key>", i) or value_end < 0 or body[key_end + 10:open_value].strip():
            raise DataError("a GLM argument is not <arg_key>…</arg_key><arg_value>…</arg_value>", code="response_format")
        key = body[i + len("<arg_key>"):key_end]
        arguments[key] = _glm_value(body[open_value + len("<arg_value>"):value_end], types.get(key))
        i = skip_space(body, value_end + len("</arg_value>"))
    return name, arguments


def _blocks(text: str, opened: str, closed: str, read: Callable[[str], Any]) -> tuple[list[Any], str]:
    """(``read`` of each ``opened…closed`` block, the text outside them)."""
    found: list[Any] = []
    outside: list[str] = []
    i = 0
    while (start := text.find(opened, i)) >= 0:
        end = text.find(closed, start + len(opened))
        if end < 0:
            raise DataError(f"an unclosed {opened} block", code="response_format")
        outside.append(text[i:start])
        found.append(read(text[start + len(opened):end]))
        i = end + len(closed)
    outside.append(text[i:])
    return found, "".join(outside)


def parse_glm(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedTurn:
    """GLM-4.5: an optional think block, visible text, ``<tool_call>`` blocks with key/value pairs."""
    reasoning, rest = _think(text)
    calls, content = _blocks(rest, "<tool_call>", "</tool_call>", lambda body: _glm_call(body, tools))
    return ParsedTurn(content=content.strip(), reasoning=reasoning, calls=calls)


_HARMONY_ENDS = ("<|end|>", "<|call|>", "<|return|>")


def _header_field(header: str, marker: str) -> str | None:
    at = header.find(marker)
    if at < 0:
        return None
    value = header[at + len(marker):]
    for stop in (" ", "<|"):
        cut = value.find(stop)
        value = value if cut < 0 else value[:cut]
    return value


def parse_harmony(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedTurn:
    """gpt-oss: the turn continues ``<|start|>assistant``; each message's header says its channel and recipient."""
    out = ParsedTurn()
    content: list[str] = []
    reasoning: list[str] = []
    body_text = text if text.lstrip().startswith("<|start|>") else "<|start|>assistant" + text
    for message in body_text.split("<|start|>")[1:]:
        at = message.find("<|message|>")
        if at < 0:
            raise DataError("a harmony message without <|message|>", code="response_format")
        header, body = message[:at], message[at + len("<|message|>"):]
        ends = [p for p in (body.find(end) for end in _HARMONY_ENDS) if p >= 0]
        if ends:
            if body[min(ends):].strip() not in _HARMONY_ENDS:
                raise DataError("text after a harmony message's end", code="response_format")
            body = body[:min(ends)]
        recipient = _header_field(header, "to=")
        channel = _header_field(header, "<|channel|>")
        if recipient is not None and recipient.startswith("functions."):
            out.calls.append(_json_arguments(recipient[len("functions."):], body))
        elif recipient is not None:
            raise DataError(f"a harmony message to {recipient!r}, not to a function", code="response_format")
        elif channel == "analysis":
            reasoning.append(body)
        else:
            content.append(body)
    out.content = "".join(content).strip()
    out.reasoning = "\n".join(reasoning).strip() if reasoning else None
    return out


def _json_arguments(name: str, body: str) -> tuple[str, Any]:
    try:
        return name, json.loads(body) if body.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise DataError(f"the arguments of {name!r} are not JSON ({exc})", code="response_format") from exc


_GEMMA_ENDS = ("<|tool_response>", "<turn|>")


def strip_stops(text: str, stops: Sequence[str]) -> str:
    """``text`` without the stop texts (and whitespace) it ends with, however many and in any order."""
    changed = True
    while changed:
        changed = False
        stripped = text.rstrip()
        for stop in stops:
            if stop and stripped.endswith(stop):
                text, changed = stripped[: -len(stop)], True
    return text


def parse_gemma4(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedTurn:
    """Gemma 4: thoughts in a channel block, ``<|tool_call>call:NAME{…}<tool_call|>`` calls, text beside."""
    out = ParsedTurn()
    thoughts, text = _blocks(strip_stops(text, _GEMMA_ENDS), "<|channel>", "<channel|>", str)
    if thoughts:
        out.reasoning = "\n".join(t.removeprefix("thought").strip() for t in thoughts)
    outside: list[str] = []
    i = 0
    while (start := text.find("<|tool_call>", i)) >= 0:
        outside.append(text[i:start])
        head = start + len("<|tool_call>")
        brace = text.find("{", head)
        if not text.startswith("call:", head) or brace < 0 or not text[head + 5:brace].strip():
            raise DataError("a Gemma tool call is not call:NAME{…}", code="response_format")
        arguments, end = scan_gemma_object(text, brace)
        if not text.startswith("<tool_call|>", end):
            raise DataError("a Gemma tool call not closed by <tool_call|>", code="response_format")
        out.calls.append((text[head + 5:brace].strip(), arguments))
        i = end + len("<tool_call|>")
    outside.append(text[i:])
    out.content = "".join(outside).strip()
    return out


def _lfm2(dialect: Dialect) -> Parser:
    def parse(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedTurn:
        reasoning, rest = _think(text)
        out = ParsedTurn(reasoning=reasoning)
        outside: list[str] = []
        i = 0
        while (start := rest.find("<|tool_call_start|>", i)) >= 0:
            outside.append(rest[i:start])
            calls, end = scan_python_calls(rest, skip_space(rest, start + len("<|tool_call_start|>")), dialect)
            end = skip_space(rest, end)
            if not rest.startswith("<|tool_call_end|>", end):
                raise DataError("LFM2 tool calls not closed by <|tool_call_end|>", code="response_format")
            out.calls.extend(calls)
            i = end + len("<|tool_call_end|>")
        outside.append(rest[i:])
        out.content = "".join(outside).strip()
        return out

    return parse


parse_lfm2 = _lfm2(PYTHON)
parse_lfm2_raw = _lfm2(PYTHON_RAW)


@functools.lru_cache(maxsize=64)
def format_for(template: str) -> tuple[str, Parser] | None:
    """(name, parser) of the format ``template`` renders tool calls in, by the markers it writes; None: the
    validator's ``<tool_call>`` JSON/XML (or no tool calls at all)."""
    if "<|tool_call_start|>" in template:
        return ("lfm2", parse_lfm2) if "replace(\"'\"" in template else ("lfm2-raw", parse_lfm2_raw)
    if "<|tool_call>" in template and "<tool_call|>" in template:
        return "gemma4", parse_gemma4
    if "<|channel|>" in template and "<|call|>" in template:
        return "harmony", parse_harmony
    if "<arg_key>" in template and "<arg_value>" in template:
        return "glm", parse_glm
    if "<|eot_id|>" in template and '"parameters": ' in template:
        return "llama-json", parse_llama_json
    return None


def payload(parsed: ParsedTurn, finish_reason: str) -> dict[str, Any]:
    """The chat-completion payload the validator checks; call ids by position (repair echoes stay
    deterministic)."""
    calls = [{"id": f"call-{index}", "type": "function", "function": {"name": name, "arguments": arguments}}
             for index, (name, arguments) in enumerate(parsed.calls)]
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content or None, "tool_calls": calls or None}
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    return {"choices": [{"index": 0, "finish_reason": "length" if finish_reason == "length" else "stop",
                         "message": message}]}
