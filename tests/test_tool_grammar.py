"""Constrained decoding of one tool call (``tool_choice="required"``): every path the grammar allows is a call the
runtime's validator accepts with an enum value verbatim (soundness), every valid call of every page's tools is
allowed token by token (completeness), and the local sampler and checkpoint server apply it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.agent.validation import interpret
from shopsimrl.errors import PolicyError
from shopsimrl.eval.runner import EvalSettings, evaluate
from shopsimrl.train.checkpoint_server import constrained_tools
from shopsimrl.train.tool_grammar import ToolCallConstraint, build_grammar


@pytest.fixture(scope="module")
def tokenizer(prepared_dir: Path) -> Any:
    from shopsimrl.train.local_lm import PRESETS, build_tokenizer, corpus

    return build_tokenizer(corpus(prepared_dir, products=200), PRESETS["tiny"])


@pytest.fixture(scope="module")
def constraint(tokenizer: Any) -> ToolCallConstraint:
    return ToolCallConstraint(tokenizer)


@pytest.fixture(scope="module")
def page_tools(prepared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[list[dict[str, Any]]]:
    """The tools of every page the heuristic and random policies visit on a few val tasks (search, results,
    product, option and terminal-adjacent pages, with their click enums)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for policy in ("heuristic", "random"):
        out = tmp_path_factory.mktemp(f"pages-{policy}")
        evaluate(EvalSettings(data=str(prepared_dir), out=str(out), split="val", policy=policy, limit=6, seed=0,
                              max_steps=12, concurrency=2))
        for line in (out / "traces.jsonl").read_text(encoding="utf-8").splitlines():
            for step in json.loads(line)["steps"]:
                if step.get("tools"):
                    found.setdefault(json.dumps(step["tools"], sort_keys=True, ensure_ascii=False), step["tools"])
    assert len(found) >= 6
    return list(found.values())


def _call(text: str, tools: Sequence[Mapping[str, Any]]) -> Any:
    payload = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}
    out = interpret(payload, tools)
    assert out.protocol_error is None, (text, out.protocol_error)
    assert len(out.tool_calls) == 1
    return out.tool_calls[0]


def _walk(constraint: ToolCallConstraint, tools: Sequence[Mapping[str, Any]], choose: Any, budget: int
          ) -> list[int]:
    state = constraint.start(tools)
    ids: list[int] = []
    for step in range(budget):
        allowed = state.allowed(budget - step)
        assert allowed, "the grammar left no token"
        token = choose(allowed)
        ids.append(token)
        state.advance(token)
        if token == constraint.eos:
            break
    return ids


def _enum_values(tools: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[str]]:
    out = {}
    for tool in tools:
        function = tool["function"]
        for key, schema in function["parameters"]["properties"].items():
            if "enum" in schema:
                out[(function["name"], key)] = [str(v) for v in schema["enum"]]
    return out


def _check_sound(tokenizer: Any, constraint: ToolCallConstraint, tools: Sequence[Mapping[str, Any]],
                 ids: list[int]) -> None:
    from shopsimrl.agent.validation import _check_arguments

    assert ids[-1] == constraint.eos, "the call was not completed within the budget"
    call = _call(tokenizer.decode(ids[:-1], skip_special_tokens=False), tools)
    schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == call.name)
    _check_arguments(call.name, call.arguments, {**schema, "required": list(schema["properties"])})
    assert call.name in {t["function"]["name"] for t in tools}
    for (name, key), values in _enum_values(tools).items():
        if call.name == name:
            assert call.arguments is not None and call.arguments[key] in values


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(values=st.lists(_TEXT, min_size=1, max_size=6, unique=True), with_search=st.booleans(),
       max_length=st.none() | st.integers(1, 12), data=st.data())
def test_every_allowed_path_is_a_valid_call(tokenizer: Any, constraint: ToolCallConstraint, values: list[str],
                                             with_search: bool, max_length: int | None, data: st.DataObject) -> None:
    """Any value (quotes, backslashes, control characters, blanks, any script) and any choice among the allowed
    tokens ends in a call the validator accepts (never a blank argument, never over ``maxLength``), the enum
    value verbatim, within the token budget."""
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "click", "parameters": {
        "type": "object", "properties": {"value": {"type": "string", "enum": values}}, "required": ["value"]}}}]
    if with_search:
        query: dict[str, Any] = {"type": "string"} if max_length is None else {"type": "string",
                                                                              "maxLength": max_length}
        tools.append({"type": "function", "function": {"name": "search", "parameters": {
            "type": "object", "properties": {"query": query}, "required": ["query"]}}})
    if not with_search and not any(v.strip() for v in values):
        with raises_kind(PolicyError, "grammar"):  # only blank values: no call the validator would accept
            constraint.start(tools)
        return
    ids = _walk(constraint, tools, lambda allowed: data.draw(st.sampled_from(allowed)), 400)
    _check_sound(tokenizer, constraint, tools, ids)


def test_every_page_call_is_allowed_and_every_walk_is_valid(tokenizer: Any, constraint: ToolCallConstraint,
                                                            page_tools: list[list[dict[str, Any]]]) -> None:
    """On every page the policies visited: each enum value's call, as the tokenizer encodes it, is accepted token
    by token (nothing valid is cut off), and seeded random walks under a tight budget end in valid calls."""
    import random

    rng = random.Random(0)
    for tools in page_tools:
        for tool in tools:
            function = tool["function"]
            props = function["parameters"]["properties"]
            args = {key: (schema["enum"][-1] if "enum" in schema else "羽绒服 L码") for key, schema in props.items()}
            text = "<tool_call>\n" + json.dumps({"name": function["name"], "arguments": args},
                                                ensure_ascii=False) + "\n</tool_call>"
            state = constraint.start(tools)
            for token in tokenizer.encode(text, add_special_tokens=False):
                assert token in state.allowed(10_000), (text, tokenizer.decode([token]))
                state.advance(token)
            assert state.allowed(1) == [constraint.eos]
        for _ in range(3):
            _check_sound(tokenizer, constraint, tools, _walk(constraint, tools, rng.choice, 64))


def test_tools_the_grammar_cannot_express_are_refused() -> None:
    with raises_kind(PolicyError, "grammar"):
        build_grammar([{"type": "function", "function": {"name": "n", "parameters": {
            "type": "object", "properties": {"k": {"type": "integer"}}}}}])
    with raises_kind(PolicyError, "grammar"):
        build_grammar([{"type": "function", "function": {"name": "click", "parameters": {
            "type": "object", "properties": {"value": {"type": "string", "enum": []}}}}}])


def test_tool_choice_is_read_as_vllm_does() -> None:
    click = {"type": "function", "function": {"name": "click", "parameters": {}}}
    search = {"type": "function", "function": {"name": "search", "parameters": {}}}
    body: dict[str, Any] = {"tools": [click, search]}
    assert constrained_tools({**body, "tool_choice": "required"}) == ([click, search], "required")
    assert constrained_tools({**body, "tool_choice": "auto"})[1] == "auto"
    assert constrained_tools(body)[1] == "auto"
    named = {"type": "function", "function": {"name": "search"}}
    assert constrained_tools({**body, "tool_choice": named}) == ([search], "required")
    assert constrained_tools({"tool_choice": "required"})[1] == "auto"  # nothing to call: free


def _check_call_and_log_probs(tokenizer: Any, model: Any, prompt: list[int], tools: Sequence[Mapping[str, Any]],
                              gen: Any) -> None:
    """A closed, valid call of ``tools`` whose reported log-probs are the model's own (unconstrained): they match a
    forward pass over the same tokens."""
    import torch

    assert gen.finish_reason == "stop"
    ids = list(gen.token_ids)
    _check_sound(tokenizer, ToolCallConstraint(tokenizer), tools, ids)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(list(gen.log_probs)), expected, atol=1e-4)


def test_sampler_with_required_calls_a_page_tool(tokenizer: Any, page_tools: list[list[dict[str, Any]]]) -> None:
    """A random-init model (which never closes a call by itself) answers every page with a valid call, and the
    reported log-probs are the model's own (unconstrained): they match a forward pass over the same tokens."""

    from shopsimrl.train.local_lm import PRESETS, CachedGenerate, build_model
    from shopsimrl.train.rollout import TurnRequest

    model = build_model(tokenizer, PRESETS["tiny"], seed=0)
    prompt = tokenizer.encode("<|im_start|>user\n买一件羽绒服<|im_end|>\n<|im_start|>assistant\n")
    free = CachedGenerate(model, tokenizer, max_new_tokens=64, temperature=1.0, seed=1)
    required = CachedGenerate(model, tokenizer, max_new_tokens=64, temperature=1.0, seed=1, tool_choice="required")
    assert free(TurnRequest(prompt, tools=page_tools[0])).finish_reason == "length"
    for tools in page_tools:
        _check_call_and_log_probs(tokenizer, model, prompt, tools, required(TurnRequest(prompt, tools=tools)))
    # a request's own smaller budget (the server's max_tokens): the call is still closed within it
    short = required(TurnRequest(prompt, tools=page_tools[0]), max_new_tokens=40)
    assert short.finish_reason == "stop" and len(short.token_ids) <= 40
    _check_sound(tokenizer, ToolCallConstraint(tokenizer), page_tools[0], list(short.token_ids))


def test_a_tokenizer_that_is_not_byte_level_is_refused() -> None:
    """Sentencepiece-style tokens (``▁`` for a space) cannot be mapped to bytes: refused, not guessed at."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(WordLevel({"<|im_end|>": 0, "▁买": 1, "<unk>": 2}, unk_token="<unk>"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", unk_token="<unk>")
    with raises_kind(PolicyError, "grammar", match="byte-level"):
        ToolCallConstraint(tokenizer)


def test_batched_sampler_applies_the_grammar_over_the_batch(tokenizer: Any, page_tools: list[list[dict[str, Any]]]
                                                            ) -> None:
    """The GPU preset's sampler: concurrent requests (one per page, from threads) are decoded as one batch; every
    constrained row is a valid call of its own page's tools, its log-probs are the model's unconstrained ones,
    a seeded request samples the same alone as in the batch, and greedy decoding equals the per-turn sampler's."""
    from concurrent.futures import ThreadPoolExecutor

    from shopsimrl.train.batched_generate import BatchedGenerate
    from shopsimrl.train.local_lm import PRESETS, CachedGenerate, build_model
    from shopsimrl.train.rollout import TurnRequest

    model = build_model(tokenizer, PRESETS["tiny"], seed=0)
    prompts = [tokenizer.encode(f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")
               for text in ("买一件羽绒服", "找个节能的小冰箱，价格不超过650元", "白色")]
    jobs = [(prompts[i % len(prompts)], tools, 100 + i) for i, tools in enumerate(page_tools)]
    batched = BatchedGenerate(model, tokenizer, max_new_tokens=64, temperature=1.0, tool_choice="required",
                              max_batch=len(jobs), gather_s=0.2)
    with ThreadPoolExecutor(len(jobs)) as pool:
        gens = list(pool.map(lambda job: batched(TurnRequest(job[0], tools=job[1]), job[2]), jobs))
    assert max(batched.batches) > 1  # the requests really shared a batch
    for (prompt, tools, _), gen in zip(jobs, gens, strict=True):
        _check_call_and_log_probs(tokenizer, model, prompt, tools, gen)
    prompt, tools, seed = jobs[-1]
    alone = batched(TurnRequest(prompt, tools=tools), seed)
    assert list(alone.token_ids) == list(gens[-1].token_ids)
    single = CachedGenerate(model, tokenizer, max_new_tokens=64, tool_choice="required")
    for prompt, tools, _ in jobs[:3]:
        assert (list(batched(TurnRequest(prompt, tools=tools), 0, 0.0).token_ids)
                == list(single(TurnRequest(prompt, tools=tools), 0, 0.0).token_ids))
