"""The response parser and validator: every protocol-error code, content fallbacks, and properties."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from shopsimrl.agent.validation import PROTOCOL_ERROR_CODES, interpret
from shopsimrl.env.tools import tools_for_state

HOME = tools_for_state({"search_available": True, "actions": []})
PRODUCT = tools_for_state({"search_available": False, "actions": ["buy now", "< prev", "颜色=红色"]})


def reply(message, finish="tool_calls"):
    return {"id": "r1", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": {}}


def call(name, arguments, call_id="c1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def code(payload, tools=HOME):
    out = interpret(payload, tools)
    return out.protocol_error["code"] if out.protocol_error else None


def test_valid_calls_give_canonical_actions():
    out = interpret(reply({"content": None, "tool_calls": [call("search", '{"query": " 小吃车 "}')]}), HOME)
    assert out.accepted and out.canonical_action() == "search[小吃车]"
    out = interpret(reply({"content": "  ", "tool_calls": [call("click", {"value": "颜色=红色"})]}), PRODUCT)
    assert out.accepted and out.canonical_action() == "click[颜色=红色]"
    assert out.tool_calls[0].raw_arguments == '{"value": "颜色=红色"}'


def test_every_protocol_error_code():
    cases = {
        "invalid_json_response": "not json at all",
        "missing_choices": {"choices": []},
        "invalid_message": {"choices": [{"message": "text"}]},
        "invalid_tool_call": reply({"tool_calls": ["x"]}),
        "missing_function": reply({"tool_calls": [{"id": "c1", "type": "function"}]}),
        "missing_tool_call_id": reply({"tool_calls": [{"type": "function", "function": {"name": "search", "arguments": "{}"}}]}),
        "missing_tool_name": reply({"tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]}),
        "invalid_arguments_type": reply({"tool_calls": [call("search", 5)]}),
        "invalid_arguments_json": reply({"tool_calls": [call("search", '{"query": ')]}),
        "invalid_arguments_object": reply({"tool_calls": [call("search", '["q"]')]}),
        "tool_call_count": reply({"content": "Action: search[x]"}, "stop"),
        "mixed_content": reply({"content": "我来搜索", "tool_calls": [call("search", '{"query": "x"}')]}),
        "unavailable_tool": reply({"tool_calls": [call("click", '{"value": "buy now"}')]}),
        "invalid_tool_arguments": reply({"tool_calls": [call("search", '{"query": "x", "k": 1}')]}),
    }
    assert set(cases) == set(PROTOCOL_ERROR_CODES)
    for expected, payload in cases.items():
        assert code(payload) == expected, expected
    assert code(reply({"tool_calls": [call("search", '{"query": "   "}')]})) == "invalid_tool_arguments"
    two = reply({"tool_calls": [call("search", '{"query": "a"}'), call("search", '{"query": "b"}', "c2")]})
    assert code(two) == "tool_call_count"


def test_length_cut_is_a_policy_failure_unless_one_call_survived():
    cut = interpret(reply({"content": None, "reasoning_content": "thinking…"}, "length"), HOME)
    assert cut.policy_failure["code"] == "generation_length" and cut.protocol_error is None
    assert cut.reasoning == "thinking…" and cut.record()["raw_response"]["id"] == "r1"
    broken = interpret(reply({"tool_calls": [call("search", '{"query": "x')]}, "length"), HOME)
    assert broken.policy_failure is not None
    kept = interpret(reply({"tool_calls": [call("search", '{"query": "x"}')]}, "length"), HOME)
    assert kept.accepted


def test_tool_calls_written_in_the_content():
    json_form = reply({"content": '<tool_call>\n{"name": "search", "arguments": {"query": "耳机"}}\n</tool_call>'}, "stop")
    out = interpret(json_form, HOME)
    assert out.accepted and out.canonical_action() == "search[耳机]" and out.metadata["tool_call_source"] == "content"
    assert out.wire_calls[0]["id"].startswith("call-content-")
    xml = "<tool_call>\n<function=click>\n<parameter=value>\n颜色=红色\n</parameter>\n</function>\n</tool_call>"
    out = interpret(reply({"content": xml}, "stop"), PRODUCT)
    assert out.accepted and out.canonical_action() == "click[颜色=红色]"
    text = reply({"content": '先想一想 <tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'}, "stop")
    assert code(text) == "mixed_content"


def test_reasoning_fields_and_think_blocks():
    for key in ("reasoning_content", "reasoning"):
        out = interpret(reply({key: "r", "tool_calls": [call("search", '{"query": "x"}')]}), HOME)
        assert out.reasoning == "r"
    out = interpret(reply({"content": "<think>hmm</think>\n", "tool_calls": [call("search", '{"query": "x"}')]}), HOME)
    assert out.reasoning == "hmm" and out.accepted


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(payload=json_values)
def test_the_parser_never_raises_and_always_decides(payload):
    out = interpret(payload, HOME)
    assert (out.protocol_error is None) != (out.policy_failure is None) or out.accepted
    if out.protocol_error is not None:
        assert out.protocol_error["code"] in PROTOCOL_ERROR_CODES
    json.dumps(out.record())


@settings(max_examples=200, deadline=None)
@given(value=st.text(min_size=1, max_size=20).filter(lambda s: s.strip()), enum_member=st.booleans())
def test_any_nonblank_click_value_is_valid_and_canonical(value, enum_member):
    """Enum membership is the environment's business: a well-formed click is always accepted."""
    tools = tools_for_state({"search_available": False, "actions": [value] if enum_member else ["buy now"]})
    out = interpret(reply({"tool_calls": [call("click", json.dumps({"value": value}))]}), tools)
    assert out.accepted and out.canonical_action() == f"click[{value.strip()}]"


# ---------------------------------------------------------------- linear-time content scanners (issue 13 item 1)

import re  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from shopsimrl.agent.validation import (  # noqa: E402
    tool_call_blocks,
    without_tool_calls,
    xml_function,
    xml_parameters,
)

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
PARAMETER = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
PIECES = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", ">", " ",
          "\n", "a", "q", "<", "="]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=25).map("".join))
def test_scanners_match_the_documented_patterns(text):
    assert tool_call_blocks(text) == TOOL_CALL.findall(text)
    assert without_tool_calls(text) == TOOL_CALL.sub("", text)
    first = FUNCTION.search(text)
    assert xml_function(text) == (first.groups() if first else None)
    assert xml_parameters(text) == PARAMETER.findall(text)


def _best(function, text, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function(text)
        best = min(best, time.perf_counter() - started)
    return best


ADVERSARIAL_CONTENT = {
    "unclosed tool calls": lambda n: "<tool_call>" * (n // 11),
    "padded unclosed tool call": lambda n: "<tool_call>" + " " * n,
    "unclosed functions": lambda n: "<tool_call><function=a>" * (n // 23) + "</tool_call>",
    "unterminated names": lambda n: "<tool_call>" + "<parameter=" * (n // 11) + "</tool_call>",
}


@pytest.mark.parametrize("shape", sorted(ADVERSARIAL_CONTENT))
def test_content_parsing_time_grows_linearly(shape):
    """8x the content may cost at most ~3x the linear expectation (the lazy regexes cost 64x)."""
    make = ADVERSARIAL_CONTENT[shape]

    def parse(content):
        interpret(reply({"role": "assistant", "content": content}, finish="stop"), HOME)

    small, large = make(4_000), make(32_000)
    ratio = _best(parse, large) / max(_best(parse, small), 1e-6)
    assert ratio < 24, f"{shape}: 8x the content took {ratio:.1f}x the time"
