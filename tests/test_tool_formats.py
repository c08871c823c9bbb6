"""The project's response parsers (``train/tool_formats``): every template TRL bundles that writes one of the
formats renders hypothesis-drawn calls that parse back to the same calls; arbitrary text raises nothing but
DataError; nesting past the cap is a typed error, not a RecursionError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.contract import SEARCH_TOOL
from shopsimrl.errors import DataError
from shopsimrl.testing.scripted import TemplatePolicyGenerate
from shopsimrl.testing.tiny_hf import build_tokenizer
from shopsimrl.train import tool_formats
from shopsimrl.train._literals import MAX_DEPTH
from shopsimrl.train._turn_text import parse_turn, strip_stops
from shopsimrl.train.chat_template import KNOWN_STOPS, episode_tools, render_text
from shopsimrl.train.tool_formats import format_for

PARSERS = {"llama-json": tool_formats.parse_llama_json, "glm": tool_formats.parse_glm,
           "harmony": tool_formats.parse_harmony, "gemma4": tool_formats.parse_gemma4,
           "lfm2": tool_formats.parse_lfm2, "lfm2-raw": tool_formats.parse_lfm2_raw}
# What a format cannot carry inside a string, as its templates write strings (no escaping of these).
UNWRITABLE = {"gemma4": ('<|"|>',), "glm": ("</arg_value>",), "lfm2-raw": ("'",)}
# Llama 3.1/3.2's templates refuse a second call; a gpt-oss turn ends at its first call's <|call|>
SINGLE_CALL = {"llama-json", "harmony"}


def _templates() -> list[Path]:
    try:
        import trl
    except ImportError:
        return []
    return sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja"))


TEMPLATES = _templates()
FORMATTED = [p for p in TEMPLATES if format_for(p.read_text(encoding="utf-8")) is not None]
needs_trl = pytest.mark.skipif(not TEMPLATES, reason="TRL (the chat templates it bundles) is not installed")

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from("\n'\"\\{}[]:,=<>|"),
                min_size=1, max_size=30).filter(lambda s: s.strip() == s and not any(m in s for m in KNOWN_STOPS))
_KEY = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_SCALAR = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _TEXT
_VALUE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
                      max_leaves=6)


def _tokenizer(template: Path) -> Any:
    tokenizer = build_tokenizer(["search probe"])
    tokenizer.chat_template = template.read_text(encoding="utf-8")
    return tokenizer


def _tools(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for name, arguments in calls:
        properties = {key: {"type": "string" if isinstance(v, str) else "object", "description": key}
                      for key, v in arguments.items()}
        tools[name] = {"type": "function", "function": {"name": name, "description": name, "parameters": {
            "type": "object", "properties": properties, "required": sorted(properties)}}}
    return list(tools.values())


def _rendered(template: Path, calls: list[tuple[str, dict[str, Any]]], tools: list[dict[str, Any]]) -> str:
    """The sampled text of an assistant turn carrying ``calls``, as the template renders it (stops stripped)."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]}
    return strip_stops(TemplatePolicyGenerate(_tokenizer(template), None, tools=tools).turn_text(message), KNOWN_STOPS)


def _writable(value: Any, banned: tuple[str, ...]) -> bool:
    if isinstance(value, str):
        return not any(b in value for b in banned)
    if isinstance(value, list):
        return all(_writable(v, banned) for v in value)
    if isinstance(value, dict):
        return all(_writable(v, banned) for v in value.values())
    return True


@needs_trl
def test_every_format_is_covered_by_templates_trl_bundles() -> None:
    found = {format_for(p.read_text(encoding="utf-8"))[0] for p in FORMATTED}  # type: ignore[index]
    assert found == set(PARSERS)


@needs_trl
@pytest.mark.parametrize("template", FORMATTED, ids=lambda p: p.stem)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_rendered_call_parses_back(template: Path, data: st.DataObject) -> None:
    name, parser = format_for(template.read_text(encoding="utf-8"))  # type: ignore[misc]
    banned = UNWRITABLE.get(name, ())
    values = _VALUE if name != "glm" else _TEXT | _VALUE.filter(lambda v: not isinstance(v, str))
    arguments = st.dictionaries(_KEY, values.filter(lambda v: _writable(v, banned)), min_size=1, max_size=3)
    count = 1 if name in SINGLE_CALL else data.draw(st.integers(1, 2))
    names = data.draw(st.lists(_KEY, min_size=count, max_size=count, unique=True))
    calls = [(n, data.draw(arguments)) for n in names]  # distinct names: one schema per tool
    tools = _tools(calls)
    try:
        text = _rendered(template, calls, tools)
    except Exception as exc:  # a value the template itself cannot render (not the parser's concern)
        pytest.skip(f"the template does not render it: {exc}")
    parsed = parser(text, tools)
    assert parsed.calls == calls, text
    assert parsed.content == "", text


def _opens_think(template: Path) -> bool:
    """Whether the generation prompt opens a think block (and the template renders tool calls at all)."""
    call = {"id": "c0", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": {"query": "q"}}}
    try:
        asked = render_text(_tokenizer(template), [{"role": "user", "content": "u"}], episode_tools(),
                            add_generation_prompt=True)
        render_text(_tokenizer(template), [{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": [
            call]}], episode_tools(), add_generation_prompt=False)
    except Exception:  # refused loudly by the probe (tests/test_train_template_matrix.py): not one of these
        return False
    return asked.rstrip().endswith("<think>")


OPENS_THINK = [p for p in TEMPLATES if _opens_think(p)]


@needs_trl
def test_the_think_opening_templates_are_the_ones_the_brief_names() -> None:
    stems = {p.stem.removesuffix("_training") for p in OPENS_THINK}
    assert {"qwen3_5_think", "qwen3_6", "qwen3_8", "nemotron_3_nano"} <= stems


@needs_trl
@pytest.mark.parametrize("template", FORMATTED + OPENS_THINK, ids=lambda p: p.stem)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(query=_TEXT.filter(lambda s: not any(m in s for m in ('<|"|>', "</arg_value>", "'", "<", ">", "\n"))))
def test_the_rollout_core_reads_a_search_call_back(template: Path, query: str) -> None:
    """Through ``parse_turn`` with the episode's tools, after the prompt the template renders (its think opener)."""
    tokenizer = _tokenizer(template)
    tools = episode_tools()
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    tail = render_text(tokenizer, head, tools, add_generation_prompt=True)[-200:]
    call = {"id": "c0", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": {"query": query}}}
    raw = TemplatePolicyGenerate(tokenizer, None, tools=tools).turn_text(
        {"role": "assistant", "content": None, "tool_calls": [call]})
    out = parse_turn(tokenizer, raw, strip_stops(raw, KNOWN_STOPS), lambda: tail, "stop", tools)
    assert out.accepted, (raw, out.protocol_error)
    assert out.call.name == SEARCH_TOOL and out.call.arguments == {"query": query}


_MARKUP = st.sampled_from(["<|tool_call>", "call:", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>",
                           "<|tool_call_start|>", "<|tool_call_end|>", "<tool_call>", "</tool_call>", "<arg_key>",
                           "</arg_key>", "<arg_value>", "</arg_value>", "<|start|>", "assistant", " to=functions.",
                           "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<think>", "</think>",
                           "<|python_tag|>", '{"name": "s", "parameters": ', "search(", "q=", "'", '"', "\\",
                           "[", "]", "{", "}", "(", ")", ",", ":", "=", "1", "-", "e", "True", "None", "\n", " "])
_NOISE = st.lists(_MARKUP | st.text(max_size=4), max_size=40).map("".join)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=400, deadline=None)
@given(text=_NOISE)
def test_arbitrary_text_raises_only_the_typed_error(name: str, text: str) -> None:
    try:
        parsed = PARSERS[name](text, episode_tools())
    except DataError:
        return
    assert isinstance(parsed.content, str) and isinstance(parsed.calls, list)


@pytest.mark.parametrize(("name", "text"), [
    ("gemma4", "<|tool_call>call:f{a:" + "[" * (MAX_DEPTH + 5000) + "<tool_call|>"),
    ("lfm2", "<|tool_call_start|>[f(a=" + "[" * (MAX_DEPTH + 5000) + ")]<|tool_call_end|>"),
    ("llama-json", '{"name": "f", "parameters": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ("harmony", ' to=functions.f<|channel|>commentary json<|message|>' + "[" * 100_000 + "]" * 100_000),
    ("lfm2", "<|tool_call_start|>[f(a=" + "9" * 10_000 + ")]<|tool_call_end|>"),
])
def test_deep_or_huge_values_are_a_typed_error(name: str, text: str) -> None:
    with raises_kind(DataError, "response_format"):
        PARSERS[name](text, ())


def test_unknown_template_has_no_format() -> None:
    assert format_for("{{ messages }}") is None
