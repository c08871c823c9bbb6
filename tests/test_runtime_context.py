"""The context policy in the evaluation runtime (docs/training.md, "Context policy"; docs/evaluation.md).

Over a real ``policy-server`` (uvicorn) and the official ``openai`` client: a next prompt that would not fit the
episode's budget is never sent; the episode ends with ``generation_length``, is scored, and the trace says so.
The rule is the one the rollout core applies (:mod:`shopsimrl.agent.context`).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from live_server import serve
from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment, RuntimeConfig
from shopsimrl.agent import context as policy
from shopsimrl.agent.model_client import ModelSettings, OpenAIChatModel
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.env import ShopWorld
from shopsimrl.env.tools import tools_for_state
from shopsimrl.eval.runner import EvalSettings, evaluate
from shopsimrl.train import rollout


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def url(world):
    with serve(create_policy_app(world, policy="heuristic")) as served:
        yield served


def play(world, url, budget):
    backend = OpenAIChatModel(ModelSettings(base_url=f"{url}/v1", model="shopsim-heuristic", max_retries=0))
    runtime = AgentRuntime(backend, InProcessEnvironment(world), config=RuntimeConfig(context_budget=budget))

    async def go():
        try:
            return await runtime.run(EpisodeJob(task_id=0))
        finally:
            await runtime.close()

    return asyncio.run(go())


def requests_served(url):
    return httpx.get(f"{url}/healthz").json()["requests"]


def first_prompt_estimate(record):
    tools = tools_for_state(record["reset"]["observation_state"])
    return policy.estimate_tokens(record["conversation"][:2], tools)


def test_the_default_budget_leaves_a_short_episode_alone(world, url):
    record = play(world, url, policy.DEFAULT_CONTEXT_BUDGET)
    assert record["status"] == "completed", record["error"]
    assert record["final"]["termination_reason"] == "purchase"
    assert record["context"] == {"context_budget": 24576, "context_reserve": 256,
                                 "context_policy": "end_scored_generation_length",
                                 "context_measure": policy.MEASURE_ESTIMATE, "context_ended": False}


@pytest.mark.parametrize("turns_before_end", [1, 2])
def test_a_small_budget_ends_the_episode_scored_with_generation_length(world, url, turns_before_end):
    full = play(world, url, None)
    assert len(full["steps"]) > turns_before_end and full["final"]["termination_reason"] == "purchase"
    # a budget the prompt of turn ``turns_before_end`` fits exactly (its estimate plus the reserve), the next not
    conversation = full["conversation"]
    prefix = [m for m in conversation if m["role"] in ("system", "user")][:2]
    assert prefix == conversation[:2]
    messages_at = [i for i, m in enumerate(conversation) if m["role"] == "assistant"]
    cut = messages_at[turns_before_end - 1]  # the history the model saw on turn ``turns_before_end``
    seen = policy.estimate_tokens(conversation[:cut], full["steps"][turns_before_end - 1]["tools"])
    budget = seen + policy.DEFAULT_CONTEXT_RESERVE
    before = requests_served(url)
    record = play(world, url, budget)
    assert requests_served(url) - before == turns_before_end  # the prompt that does not fit is never sent
    assert record["status"] == "completed", record["error"]
    assert len(record["steps"]) == turns_before_end
    final = record["final"]
    assert final["termination_reason"] == "generation_length"
    assert final["reward_detail"]["termination_reason"] == "generation_length"  # scored by the environment
    context = record["context"]
    assert context["context_ended"] is True and context["context_policy"] == rollout.CONTEXT_POLICY
    assert context["context_budget"] == budget and context["context_measure"] == policy.MEASURE_ESTIMATE
    assert context["context_overflow"]["turn"] == turns_before_end + 1
    assert context["context_overflow"]["prompt_tokens"] + policy.DEFAULT_CONTEXT_RESERVE > budget
    assert first_prompt_estimate(record) + policy.DEFAULT_CONTEXT_RESERVE <= budget


def test_no_budget_and_a_first_prompt_that_does_not_fit(world, url):
    record = play(world, url, None)
    assert record["context"]["context_budget"] is None and not record["context"]["context_ended"]
    before = requests_served(url)
    tiny = play(world, url, 300)  # the first prompt alone is over it: no model call, still scored
    assert requests_served(url) == before and tiny["steps"] == []
    assert tiny["status"] == "completed" and tiny["final"]["termination_reason"] == "generation_length"
    assert tiny["context"]["context_overflow"]["turn"] == 1


def test_the_rule_is_one_definition():
    """The rollout core's names are the context module's, and the boundary is the same for both."""
    assert rollout.CONTEXT_POLICY is policy.CONTEXT_POLICY
    assert rollout.DEFAULT_CONTEXT_BUDGET == policy.DEFAULT_CONTEXT_BUDGET == 24576
    assert rollout.context_exceeded is policy.context_exceeded
    assert not policy.context_exceeded(24576 - 256, 24576) and policy.context_exceeded(24576 - 255, 24576)
    assert not policy.context_exceeded(10**9, None)
    assert policy.context_exceeded(51, 100) and not policy.context_exceeded(50, 100)  # reserve ≤ half the budget


def test_the_estimate_counts_ascii_by_thirds_and_other_characters_whole():
    empty = policy.estimate_tokens([], [])  # '[[],[]]': 7 ASCII characters
    assert empty == 3
    ascii_only = policy.estimate_tokens([{"c": "x" * 300}], [])
    assert ascii_only - empty >= 100
    cjk = policy.estimate_tokens([{"c": "可移动小吃车" * 50}], [])
    assert cjk - policy.estimate_tokens([{"c": ""}], []) == 300
    assert json.dumps(policy.MEASURE_ESTIMATE)  # recorded as is in traces and plans


def test_eval_records_the_budget_in_the_plan_and_ends_long_episodes(world, prepared_dir, tmp_path):
    out = tmp_path / "run"
    result = evaluate(EvalSettings(data=str(prepared_dir), out=str(out), split="test", policy="heuristic",
                                   concurrency=1, context_budget=300), world=world)
    plan = json.loads((out / "manifest.json").read_text())["plan"]
    assert plan["runtime"]["context_budget"] == 300
    assert plan["runtime"]["context_policy"] == "end_scored_generation_length"
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert result.ran == len(traces) == 2
    assert all(t["status"] == "completed" and t["context"]["context_ended"] for t in traces)
    assert all(t["final"]["termination_reason"] == "generation_length" for t in traces)
    unbounded = evaluate(EvalSettings(data=str(prepared_dir), out=str(tmp_path / "policy"), split="test",
                                      policy="heuristic", concurrency=1), world=world)
    assert unbounded.ran == 2
    plan = json.loads((tmp_path / "policy" / "manifest.json").read_text())["plan"]
    assert plan["runtime"]["context_budget"] is None  # a built-in policy has no context window
