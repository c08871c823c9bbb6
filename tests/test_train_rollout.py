"""Rollout core: token bookkeeping invariants over random turn sequences, statuses and the runtime's rules."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.env import ShopWorld
from shopsimrl.errors import ShopSimError
from shopsimrl.train.rollout import (
    ABORTED,
    COMPLETED,
    TRUNCATED,
    Generation,
    RolloutConfig,
    RolloutContext,
    TokenLedger,
    TurnRequest,
    run_rollout,
)
from toy import PolicyGenerate, ToyChatTokenizer, tool_call_text

KINDS = ("valid", "valid", "valid", "enum_violation", "text_only", "bad_args", "unavailable", "mixed",
         "two_calls", "length", "reasoning")


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


class ScriptedGenerate:
    """Plays a script of output kinds against whatever page the prompt shows (a stand-in inference engine)."""

    def __init__(self, tokenizer: ToyChatTokenizer, script: list[tuple[str, int]]) -> None:
        self.tokenizer = tokenizer
        self.script = list(script)
        self.prompts: list[list[int]] = []
        self.samples: list[list[int]] = []
        self.log_probs: list[list[float]] = []
        self.kinds: list[str] = []

    def text(self, kind: str, pick: int, tools: list[dict[str, Any]]) -> tuple[str, str]:
        offered = {t["function"]["name"]: t["function"] for t in tools}
        enum = offered.get("click", {}).get("parameters", {}).get("properties", {}).get("value", {}).get("enum", [])
        if kind in ("valid", "reasoning"):
            reasoning = "先想一想" * (pick % 3 + 1) if kind == "reasoning" else ""
            if enum and (pick % 2 or "search" not in offered):
                return tool_call_text("click", {"value": enum[pick % len(enum)]}, reasoning), "stop"
            return tool_call_text("search", {"query": "冰箱 小吃车"[: pick % 6 + 1]}, reasoning), "stop"
        if kind == "enum_violation" and "click" in offered:
            return tool_call_text("click", {"value": "不存在的值"}), "stop"
        if kind == "bad_args":
            name = "click" if "click" in offered else "search"
            return tool_call_text(name, {"wrong": "x"}), "stop"
        if kind == "unavailable":
            return tool_call_text("search" if "search" not in offered else "checkout", {"query": "x"}), "stop"
        if kind == "mixed":
            return "我来搜索。" + tool_call_text("search", {"query": "冰箱"}), "stop"
        if kind == "two_calls":
            return tool_call_text("search", {"query": "a"}) + tool_call_text("search", {"query": "b"}), "stop"
        if kind == "length":
            return "<think>" + "很长的思考" * (pick % 5 + 1), "length"
        return "Action: click[buy now]", "stop"  # text_only

    def __call__(self, prompt_ids: TurnRequest) -> Generation:
        _messages, tools = self.tokenizer.conversation_for(prompt_ids)
        tools = list(prompt_ids.tools) or tools  # the page's own tools (the render may show the enum-free set)
        kind, pick = self.script.pop(0) if self.script else ("valid", 1)
        text, finish = self.text(kind, pick, tools)
        ids = self.tokenizer.encode(text) + ([self.tokenizer.eos_token_id] if finish == "stop" else [])
        lps = [-(i % 7) / 8 - 0.01 for i in range(len(ids))]
        self.prompts.append(list(prompt_ids))
        self.samples.append(ids)
        self.log_probs.append(lps)
        self.kinds.append(kind)
        return Generation(ids, lps, finish)


def _run(world: ShopWorld, tokenizer: ToyChatTokenizer, generate: Any, task_id: int = 0,
         config: RolloutConfig | None = None, environment: Any = None):
    return asyncio.run(run_rollout(RolloutContext(task_id), tokenizer, generate,
                                   environment or InProcessEnvironment(world), config=config))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 50)), max_size=14),
       tools_in_prompt=st.booleans(), keep_reasoning=st.booleans(), max_steps=st.integers(1, 12),
       task=st.integers(0, 4), mode=st.sampled_from(["resegment", "append"]))
def test_token_invariants_over_random_turn_sequences(world: ShopWorld, script, tools_in_prompt: bool,
                                                     keep_reasoning: bool, max_steps: int, task: int,
                                                     mode: str) -> None:
    tokenizer = ToyChatTokenizer(tools_in_prompt=tools_in_prompt)
    generate = ScriptedGenerate(tokenizer, script)
    ids = world.catalog.split("all")
    traj = _run(world, tokenizer, generate, ids[task % len(ids)],
                RolloutConfig(max_steps=max_steps, keep_reasoning=keep_reasoning, mode=mode))
    assert traj.status in (COMPLETED, TRUNCATED), traj.error
    generated = [t for sample in generate.samples for t in sample]
    # every sampled token is trained exactly once, in order; nothing else is trained
    assert traj.generated_tokens == generated
    assert traj.trained_tokens == generated
    assert Counter(traj.trained_tokens) == Counter(generated)
    trained_lps = [p for s in traj.segments for p, m in zip(s.log_probs, s.loss_mask, strict=True) if m]
    assert trained_lps == [p for lps in generate.log_probs for p in lps]
    turn = 0
    for segment in traj.segments:
        assert len(segment.tokens) == len(segment.loss_mask) == len(segment.log_probs)
        assert all(p == 0.0 for p, m in zip(segment.log_probs, segment.loss_mask, strict=True) if not m)
        assert segment.loss_mask[: segment.prompt_length] == [0] * segment.prompt_length
        assert segment.tokens[: segment.prompt_length] == generate.prompts[turn]
        # each turn of the segment saw exactly the segment's tokens so far as its prompt
        for _ in range(segment.turns):
            prompt = generate.prompts[turn]
            assert segment.tokens[: len(prompt)] == prompt
            assert segment.tokens[len(prompt): len(prompt) + len(generate.samples[turn])] == generate.samples[turn]
            turn += 1
    assert turn == len(generate.samples) == len(traj.steps)
    # a new segment starts exactly when a prompt does not extend what came before it
    breaks = sum(
        1 for prev_prompt, prev_sample, prompt in zip(generate.prompts[:-1], generate.samples[:-1], generate.prompts[1:], strict=True)
        if prompt[: len(prev_prompt) + len(prev_sample)] != prev_prompt + prev_sample
    )
    assert len(traj.segments) == 1 + breaks
    if mode == "append":
        assert len(traj.segments) == 1
    assert len(traj.steps) <= max_steps
    cut = "length" in generate.kinds
    assert (traj.status == TRUNCATED) == cut
    if cut:
        assert generate.kinds[-1] == "length" and traj.reward == 0.0
    assert traj.reward == traj.reward_detail["r_strict"]
    assert traj.metadata["termination_reason"] in ("purchase", "action_limit", "generation_length")


def test_canonical_samples_without_tools_in_prompt_give_one_segment(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer(tools_in_prompt=False)
    traj = _run(world, tokenizer, PolicyGenerate(tokenizer, make_policy("oracle", world)))
    assert traj.status == COMPLETED and traj.reward == 1.0
    assert len(traj.segments) == 1 and traj.segments[0].turns == 4
    assert traj.metadata["termination_reason"] == "purchase"


def test_per_page_tools_in_prompt_start_a_segment_whenever_the_prefix_changes(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer(tools_in_prompt=True)
    traj = _run(world, tokenizer, PolicyGenerate(tokenizer, make_policy("oracle", world)),
                config=RolloutConfig(episode_tools=False))
    assert traj.reward == 1.0
    assert len(traj.segments) == 4  # the click enum differs on every page of this episode
    assert sum(s.turns for s in traj.segments) == 4


def test_tools_rendered_once_per_episode_keep_one_segment(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer(tools_in_prompt=True)
    traj = _run(world, tokenizer, PolicyGenerate(tokenizer, make_policy("oracle", world)))
    assert traj.reward == 1.0 and len(traj.segments) == 1 and traj.segments[0].turns == 4
    text = tokenizer.decode(traj.segments[0].tokens)
    assert text.count("# Tools") == 1 and '"enum"' not in text  # the enum is in the observation text instead
    assert "可点击元素" in text


def test_append_mode_keeps_one_sequence_with_current_context(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer(tools_in_prompt=True)
    generate = PolicyGenerate(tokenizer, make_policy("oracle", world), reasoning=True)
    traj = _run(world, tokenizer, generate, config=RolloutConfig(mode="append"))
    assert traj.reward == 1.0 and len(traj.segments) == 1 and traj.segments[0].turns == 4
    text = tokenizer.decode(traj.segments[0].tokens)
    # the sampled reasoning stays in the sequence, and every observation was appended after it
    assert text.count("<think>") == 4 and text.count("<tool_response>") == 3  # none after the purchase
    with pytest.raises(ShopSimError):
        RolloutConfig(mode="other")


def test_protocol_error_gets_the_runtime_repair_and_consumes_a_turn(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer()
    generate = ScriptedGenerate(tokenizer, [("text_only", 0), ("bad_args", 0), ("valid", 0)])
    traj = _run(world, tokenizer, generate, config=RolloutConfig(max_steps=3))
    assert [s.get("protocol_error", {}).get("code") for s in traj.steps] == [
        "tool_call_count", "invalid_tool_arguments", None]
    roles = [m["role"] for m in traj.messages]
    assert roles[:6] == ["system", "user", "assistant", "user", "assistant", "tool"]
    feedback = json.loads(traj.messages[3]["content"])
    assert feedback["type"] == "tool_protocol_error" and feedback["available_tools"] == ["search"]
    assert json.loads(traj.messages[5]["content"])["code"] == "invalid_tool_arguments"
    assert traj.steps[2]["action"].startswith("search[")
    assert traj.metadata["termination_reason"] == "action_limit" and traj.status == COMPLETED


def test_enum_violation_reaches_the_environment(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer()
    generate = ScriptedGenerate(tokenizer, [("valid", 0), ("enum_violation", 0)])
    traj = _run(world, tokenizer, generate, config=RolloutConfig(max_steps=2))
    assert traj.steps[1]["action"] == "click[不存在的值]" and traj.steps[1]["valid"] is False
    assert "protocol_error" not in traj.steps[1]


def test_length_cut_is_a_truncated_zero_reward_episode(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer()
    traj = _run(world, tokenizer, ScriptedGenerate(tokenizer, [("valid", 0), ("length", 3)]))
    assert traj.status == TRUNCATED and traj.reward == 0.0
    assert traj.metadata["termination_reason"] == "generation_length"
    assert traj.steps[-1]["policy_failure"]["code"] == "generation_length"


def test_context_overflow_ends_as_generation_length(world: ShopWorld) -> None:
    tokenizer = ToyChatTokenizer()
    generate = ScriptedGenerate(tokenizer, [])
    first = len(tokenizer.apply_chat_template(
        [{"role": "system", "content": ""}], tools=None, add_generation_prompt=True))
    traj = _run(world, tokenizer, generate, config=RolloutConfig(max_context_len=first + 10))
    assert traj.status == ABORTED  # no sampled token at all: nothing to train, unscored
    assert traj.error["message"] == "the episode produced no trainable token"


@pytest.mark.parametrize("bad", [
    Generation([5, 6], [-0.1], "stop"),
    Generation([5, 6], [-0.1, float("nan")], "stop"),
    Generation([5, 6], [-0.1, -0.2], "abort"),
    Generation([], [], "stop"),
])
def test_bad_generations_abort_the_episode(world: ShopWorld, bad: Generation) -> None:
    traj = _run(world, ToyChatTokenizer(), lambda ids: bad)
    assert traj.status == ABORTED and not traj.scored and traj.segments == []
    assert traj.error["stage"] == "model_step_1" and traj.error["type"] == "RolloutError"


def test_environment_failure_aborts_and_async_generate_is_awaited(world: ShopWorld) -> None:
    class Broken(InProcessEnvironment):
        def new(self):
            env = super().new()

            async def step(action: str) -> dict:
                raise ConnectionError("env went away")

            env.step = step  # type: ignore[method-assign]
            return env

    tokenizer = ToyChatTokenizer()
    policy = PolicyGenerate(tokenizer, make_policy("oracle", world))

    async def agenerate(ids: list[int]) -> Generation:
        await asyncio.sleep(0)
        return policy(ids)

    traj = _run(world, tokenizer, agenerate, environment=Broken(world))
    assert traj.status == ABORTED
    error = dict(traj.error or {})  # the runtime's record shape: the traceback names where it was raised
    assert "env went away" in error.pop("traceback")
    assert error == {"stage": "environment_step_1", "type": "ConnectionError", "code": None,
                     "message": "env went away"}  # code: None for an exception that is not a ShopSimError
    ok = _run(world, tokenizer, agenerate)
    assert ok.status == COMPLETED and ok.reward == 1.0


def test_ledger_extends_or_forks() -> None:
    ledger = TokenLedger()
    ledger.prompt([1, 2, 3])
    ledger.sample([4, 5], [-0.1, -0.2])
    ledger.prompt([1, 2, 3, 4, 5, 6])  # extension
    ledger.sample([7], [-0.3])
    ledger.prompt([1, 2, 9])  # not an extension → new segment
    ledger.sample([8], [-0.4])
    first, second = ledger.segments
    assert first.tokens == [1, 2, 3, 4, 5, 6, 7] and first.loss_mask == [0, 0, 0, 1, 1, 0, 1]
    assert first.response_tokens == [4, 5, 6, 7] and first.response_log_probs == [-0.1, -0.2, 0.0, -0.3]
    assert second.tokens == [1, 2, 9, 8] and second.prompt_length == 3 and second.response_mask == [1]


def test_dialogue_shopper_replies_are_never_trained_on(world: ShopWorld) -> None:
    """Dialogue mode (issue 16): the shopper's replies come back as tool messages, so they carry loss mask 0
    while the agent's own questions are trained; the prefix stays one segment with ask_user rendered once."""
    tokenizer = ToyChatTokenizer(tools_in_prompt=True)
    context = RolloutContext(0, interaction_mode="multi_turn", shopper="rule")
    traj = asyncio.run(run_rollout(context, tokenizer, PolicyGenerate(tokenizer, make_policy("dialogue-heuristic", world)),
                                   InProcessEnvironment(world), config=RolloutConfig(max_steps=40)))
    assert traj.status == COMPLETED, traj.error
    questions = [s["action"][len("ask_user["):-1] for s in traj.steps if (s["action"] or "").startswith("ask_user[")]
    replies = [m["content"].split("顾客回复：", 1)[1].split("\n", 1)[0] for m in traj.messages
               if m["role"] == "tool" and "顾客回复：" in m["content"]]
    assert questions and len(replies) == len(questions)
    assert len(traj.segments) == 1
    segment = traj.segments[0]
    trained = tokenizer.decode([t for t, m in zip(segment.tokens, segment.loss_mask, strict=True) if m])
    untrained = tokenizer.decode([t for t, m in zip(segment.tokens, segment.loss_mask, strict=True) if not m])
    assert all(q in trained for q in questions)
    assert all(r not in trained and r in untrained for r in replies)
    assert "顾客回复" not in trained and traj.messages[1]["content"].count("购物任务") == 1
    assert tokenizer.decode(segment.tokens).count('"ask_user"') == 1 + len(questions)  # the tool: rendered once
