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
