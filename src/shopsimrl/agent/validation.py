"""Parse a chat-completion response and check it against the offered tools (docs/contract.md#runtime-turn-rules, #model-client).

One parser serves every backend (an OpenAI-compatible server, the built-in policies, the policy server), so
a protocol error means the same thing whoever produced the answer. The rule is strict: exactly one call of an
offered tool, with arguments that satisfy that tool's parameter schema (``env/tools``), and no visible text
beside it. A cut-off generation
(``finish_reason == "length"``) without exactly one decodable call is a policy failure, not a protocol error.
A well-formed ``click`` whose value is outside the enum is *valid* here: the environment judges it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import GENERATION_LENGTH as GENERATION_LENGTH
from ..env.tools import tool_named
from ..errors import ShopSimError

REPAIR_INSTRUCTION = "上一轮未执行任何环境动作。请基于同一页面重新作答，只调用一个当前提供的函数工具，不要输出可见文本。"

PROTOCOL_ERROR_CODES = (
    "tool_call_count", "mixed_content", "invalid_tool_call", "missing_function", "missing_tool_call_id",
    "missing_tool_name", "invalid_arguments_type", "invalid_arguments_json", "invalid_arguments_object",
    "missing_choices", "invalid_message", "invalid_json_response", "unavailable_tool", "invalid_tool_arguments",
)

# Model text is adversarial input: the block scanners below find their delimiters with ``str.find`` and never
# rescan text, so they run in linear time where the equivalent lazy regexes (kept as the documented meaning,
# and checked against the scanners by property tests) are quadratic on unclosed or whitespace-padded blocks:
#   tool call   <tool_call>\s*(.*?)\s*</tool_call>              (DOTALL)
#   function    <function=([^>\s]+)>(.*?)</function>             (DOTALL)
#   parameter   <parameter=([^>\s]+)>\n?(.*?)\n?</parameter>      (DOTALL)
_THINK_BLOCK = re.compile(r"^\s*<think>(.*?)</think>", re.DOTALL)  # anchored at 0: one linear scan
_NAME = re.compile(r"[^>\s]+")
_TOOL_OPEN, _TOOL_CLOSE = "<tool_call>", "</tool_call>"


def _tool_call_spans(text: str) -> list[tuple[int, int, int, int]]:
    """(block start, body start, body end, block end) of each ``<tool_call>`` block, leftmost first."""
    spans = []
    position = 0
    while (start := text.find(_TOOL_OPEN, position)) >= 0:
        close = text.find(_TOOL_CLOSE, start + len(_TOOL_OPEN))
        if close < 0:  # no later opening can be closed either
            break
        spans.append((start, start + len(_TOOL_OPEN), close, close + len(_TOOL_CLOSE)))
        position = close + len(_TOOL_CLOSE)
    return spans


def _tagged(text: str, tag: str, *, first_only: bool = False) -> list[tuple[str, str]]:
    """(name, inner text) of each ``<tag=NAME>inner</tag>`` element, as the regex above finds them.

    A failed ``NAME`` run fails for every opening that starts inside it too, so the scan skips the whole run.
    """
    opening, closing = f"<{tag}=", f"</{tag}>"
    found = []
    position = 0
    while (start := text.find(opening, position)) >= 0:
        name = _NAME.match(text, start + len(opening))
        if name is None:
            position = start + len(opening)
            continue
        if not text.startswith(">", name.end()):  # whitespace or the end: every opening inside the run fails
            position = name.end()
            continue
        close = text.find(closing, name.end() + 1)
        if close < 0:
            break
        found.append((name.group(), text[name.end() + 1:close]))
        if first_only:
            break
        position = close + len(closing)
    return found


def tool_call_blocks(text: str) -> list[str]:
    """The stripped body of each ``<tool_call>`` block (linear-time ``findall`` of the tool-call pattern)."""
    return [text[begin:end].strip() for _, begin, end, _ in _tool_call_spans(text)]


def without_tool_calls(text: str) -> str:
    """The text with every ``<tool_call>`` block removed (linear-time ``sub`` of the tool-call pattern)."""
    parts, position = [], 0
    for start, _, _, end in _tool_call_spans(text):
        parts.append(text[position:start])
        position = end
    parts.append(text[position:])
    return "".join(parts)


def xml_function(text: str) -> tuple[str, str] | None:
    """The first ``<function=NAME>…</function>``: (NAME, inner text), or None."""
    found = _tagged(text, "function", first_only=True)
    return found[0] if found else None


def xml_parameters(text: str) -> list[tuple[str, str]]:
    """Each ``<parameter=NAME>value</parameter>``, one newline trimmed at either end of the value."""
    out = []
    for name, value in _tagged(text, "parameter"):
        if value.startswith("\n"):
            value = value[1:]
        if value.endswith("\n"):
            value = value[:-1]
        out.append((name, value))
    return out


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "raw_arguments": self.raw_arguments}

    def wire(self) -> dict[str, Any]:
        """The call as it goes back into the conversation (arguments: the raw JSON string as returned)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.raw_arguments}}


@dataclass
class ModelOutput:
    """The parsed output of one model call (the ``model`` field of a step record)."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    response_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    protocol_error: dict[str, str] | None = None
    policy_failure: dict[str, str] | None = None
    raw_response: Any = None
    wire_calls: list[dict[str, Any]] = field(default_factory=list)  # every call as sent back on a repair

    @property
    def accepted(self) -> bool:
        return self.protocol_error is None and self.policy_failure is None

    @property
    def call(self) -> ToolCall:
        return self.tool_calls[0]

    def canonical_action(self) -> str:
        call = self.call
        tool = tool_named(call.name)
        assert tool is not None, "only an accepted call has a canonical action"
        return tool.action((call.arguments or {})[tool.argument])

    def record(self) -> dict[str, Any]:
        out = {
            "content": self.content, "reasoning": self.reasoning,
            "tool_calls": [call.record() for call in self.tool_calls], "finish_reason": self.finish_reason,
            "usage": self.usage, "response_id": self.response_id, "metadata": self.metadata,
            "latency_ms": self.latency_ms, "protocol_error": self.protocol_error,
            "policy_failure": self.policy_failure,
        }
        if not self.accepted:
            out["raw_response"] = self.raw_response
        return out


class _Reject(ShopSimError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    raise _Reject("invalid_message", "message.content must be a string, a list of parts or null")


def _arguments(raw: Any, where: str) -> tuple[dict[str, Any], str]:
    if isinstance(raw, Mapping):
        return dict(raw), json.dumps(raw, ensure_ascii=False)
    if not isinstance(raw, str):
        raise _Reject("invalid_arguments_type", f"{where}: arguments must be a JSON string")
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise _Reject("invalid_arguments_json", f"{where}: arguments are not valid JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise _Reject("invalid_arguments_object", f"{where}: arguments must be a JSON object")
    return parsed, raw


def _wire_call(raw: Any, index: int) -> ToolCall:
    where = f"tool call #{index + 1}"
    if not isinstance(raw, Mapping):
        raise _Reject("invalid_tool_call", f"{where} is not an object")
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise _Reject("missing_function", f"{where} has no function object")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _Reject("missing_tool_call_id", f"{where} has no id")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise _Reject("missing_tool_name", f"{where} has no function name")
    arguments, text = _arguments(function.get("arguments"), where)
    return ToolCall(call_id, name, arguments, text)


def _sanitized(raw: Any, index: int) -> dict[str, Any]:
    """A malformed call made presentable for the repair turn (ids and strings filled in)."""
    raw = raw if isinstance(raw, Mapping) else {}
    function = raw.get("function") if isinstance(raw.get("function"), Mapping) else {}
    call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else f"call-repair-{index}"
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    name = function.get("name") if isinstance(function.get("name"), str) else ""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _content_calls(content: str) -> tuple[list[ToolCall], str]:
    """Tool calls written in the content as ``<tool_call>…</tool_call>`` (JSON or Qwen XML), and the rest."""
    calls: list[ToolCall] = []
    for index, body in enumerate(tool_call_blocks(content)):
        call_id = "call-content-" + hashlib.sha256(f"{index}:{body}".encode()).hexdigest()[:24]
        where = f"tool call #{index + 1} in the content"
        xml = xml_function(body)
        if xml is not None:
            params = {key: value for key, value in xml_parameters(xml[1])}
            calls.append(ToolCall(call_id, xml[0], params, json.dumps(params, ensure_ascii=False)))
            continue
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise _Reject("invalid_tool_call", f"{where} is not JSON ({exc})") from exc
        if not isinstance(payload, Mapping):
            raise _Reject("invalid_tool_call", f"{where} is not an object")
        name = payload.get("name")
        if not isinstance(name, str) or not name:
            raise _Reject("missing_tool_name", f"{where} has no name")
        arguments, text = _arguments(payload.get("arguments", payload.get("parameters", {})), where)
        calls.append(ToolCall(call_id, name, arguments, text))
    return calls, without_tool_calls(content).strip()


def offered_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(tool["function"]["name"]) for tool in tools if isinstance(tool.get("function"), Mapping)]


def _check_arguments(name: str, arguments: Mapping[str, Any], parameters: Mapping[str, Any]) -> None:
    """``arguments`` against the tool's parameter schema: the required keys and no others (``additionalProperties``
    is false), each a string within its ``maxLength``; and, the one rule a schema cannot say, not blank. The
    ``enum`` of a page's ``click`` is left to the environment (a value outside it is an invalid action)."""
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = list(parameters.get("required") or [])
    if set(arguments) != set(required) or not set(required) <= set(properties):
        keys = required[0] if len(required) == 1 else required
        raise _Reject("invalid_tool_arguments", f"{name} takes exactly one argument {keys!r}")
    for key in required:
        value, rules = arguments[key], properties[key]
        if not isinstance(value, str) or not value.strip():
            raise _Reject("invalid_tool_arguments", f"{name}.{key} must be a non-empty string")
        limit = rules.get("maxLength")
        if isinstance(limit, int) and len(value) > limit:
            raise _Reject("invalid_tool_arguments", f"{name}.{key} must be at most {limit} characters")


def _check_call(call: ToolCall, offered: Sequence[str]) -> None:
    if call.name not in offered:
        raise _Reject("unavailable_tool", f"tool {call.name!r} is not offered on this page; offered: {list(offered)}")
    tool = tool_named(call.name)
    if tool is None:
        raise _Reject("invalid_tool_arguments", f"{call.name} takes exactly one argument None")
    _check_arguments(call.name, call.arguments or {}, tool.parameters())


def interpret(payload: Any, tools: Sequence[Mapping[str, Any]], *, latency_ms: float = 0.0) -> ModelOutput:
    """Parse ``payload`` (a chat-completion JSON object) into a :class:`ModelOutput` and validate it."""
    out = ModelOutput(latency_ms=latency_ms, raw_response=payload)
    structural: _Reject | None = None
    try:
        if not isinstance(payload, Mapping):
            raise _Reject("invalid_json_response", "the response is not a JSON object")
        out.response_id = payload.get("id") if isinstance(payload.get("id"), str) else None
        out.usage = dict(payload["usage"]) if isinstance(payload.get("usage"), Mapping) else {}
        if isinstance(payload.get("model"), str):
            out.metadata["model"] = payload["model"]
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise _Reject("missing_choices", "the response has no choices")
        choice = choices[0]
        out.finish_reason = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
        message = choice.get("message")
        if not isinstance(message, Mapping):
            raise _Reject("invalid_message", "choices[0].message is not an object")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        out.reasoning = reasoning if isinstance(reasoning, str) else None
        content = _text(message.get("content"))
        if content is not None and out.reasoning is None:
            think = _THINK_BLOCK.match(content)
            if think is not None:
                out.reasoning, content = think.group(1).strip(), content[think.end():]
        out.content = content
        raw_calls = message.get("tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list):
            raise _Reject("invalid_tool_call", "message.tool_calls must be a list")
        if raw_calls:
            out.metadata["tool_call_source"] = "tool_calls"
            out.wire_calls = [_sanitized(raw, index) for index, raw in enumerate(raw_calls)]
            for index, raw in enumerate(raw_calls):
                out.tool_calls.append(_wire_call(raw, index))
        elif content and "<tool_call>" in content:
            out.metadata["tool_call_source"] = "content"
            out.tool_calls, out.content = _content_calls(content)
            out.wire_calls = [call.wire() for call in out.tool_calls]
    except _Reject as reject:
        structural = reject
    if tools and out.finish_reason == "length" and (structural is not None or len(out.tool_calls) != 1):
        out.policy_failure = {"code": GENERATION_LENGTH,
                              "message": "the generation was cut off by max_tokens before one complete tool call"}
        return out
    try:
        if structural is not None:
            raise structural
        if len(out.tool_calls) != 1:
            raise _Reject("tool_call_count", f"expected exactly one tool call, got {len(out.tool_calls)}")
        if out.content is not None and out.content.strip():
            raise _Reject("mixed_content", "a tool call must come without visible text")
        _check_call(out.call, offered_names(tools))
    except _Reject as reject:
        out.protocol_error = {"code": reject.code, "message": str(reject)}
    return out


def protocol_feedback(error: Mapping[str, str], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The repair payload sent back after a protocol error (same page, no environment action)."""
    return {
        "type": "tool_protocol_error", "code": error["code"], "message": error["message"],
        "instruction": REPAIR_INSTRUCTION, "available_tools": offered_names(tools),
    }


def feedback_text(feedback: Mapping[str, Any]) -> str:
    return json.dumps(feedback, ensure_ascii=False, separators=(",", ":"))
