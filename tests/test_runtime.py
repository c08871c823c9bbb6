"""The turn loop (docs/contract.md#runtime-prompt, #runtime-turn-rules) over the in-process environment, with a scripted chat model.

The scripted model answers with chat-completion JSON (the wire format), which goes through the same parser and
validator as a real server's answers; the end-to-end path through HTTP is in test_policy_server.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from shopsimrl.agent.policy import PERSONA_HEADER, context_from_messages
from shopsimrl.agent.prompt import SYSTEM_PROMPT, first_user_message, persona_line, system_message
from shopsimrl.agent.runtime import (
    AgentRuntime,
    EpisodeJob,
    InProcessEnvironment,
    RuntimeConfig,
    as_async_env,
)
from shopsimrl.agent.skills import SkillBank, render_skills
from shopsimrl.agent.validation import REPAIR_INSTRUCTION, interpret
from shopsimrl.env.shop_env import ShopWorld

QUERY = "可移动小吃车 煤气灶 三个锅"
ASIN = "824100258497"
OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


def completion(*calls, content=None, finish="tool_calls", reasoning=None):
    tool_calls = [
        {"id": f"call-{i}", "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}}
        for i, (name, args) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls or None}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {"id": "cmpl-1", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                      "completion_tokens_details": {"reasoning_tokens": 2}}}


class ScriptedModel:
    """Replays chat-completion payloads and records what it was sent."""

    model_name = "scripted"

    def __init__(self, payloads):
        self.payloads = list(payloads)
        self.calls = []
        self.closed = False

    def identity(self):
        return {"provider": "scripted", "model": self.model_name}

    async def generate(self, messages, tools, *, seed=0, task_id=None):
        self.calls.append({"messages": json.loads(json.dumps(messages)), "tools": tools, "seed": seed})
        return interpret(self.payloads.pop(0), tools)

    async def close(self):
        self.closed = True


class CountingEnvironment(InProcessEnvironment):
    """The in-process environment, counting terminate calls and closes (the real ShopEnv underneath)."""

    def __init__(self, world):
        super().__init__(world)
        self.terminations = []
        self.closed = 0

    def new(self):
        env = self.world.new_env()
        outer = self

        class Tracked:
            def reset(self, *a, **k):
                return env.reset(*a, **k)

            def step(self, action):
                return env.step(action)

            def terminate(self, reason):
                outer.terminations.append(reason)
                return env.terminate(reason)

            def close(self):
                outer.closed += 1
                env.close()

        return as_async_env(Tracked())


def run(world, payloads, *, max_steps=30, task_id=0, seed=100, skills=None):
    model = ScriptedModel(payloads)
    environment = CountingEnvironment(world)
    runtime = AgentRuntime(model, environment, config=RuntimeConfig(max_steps=max_steps), skills=skills)
    record = asyncio.run(runtime.run(EpisodeJob(task_id=task_id, seed=seed)))
    return record, model, environment


def actions(record):
    return [step["action"] for step in record["steps"] if step["action"] is not None]


def test_completed_trace_is_self_contained(world, tmp_path):
    bank_file = tmp_path / "bank.json"
    bank_file.write_text(json.dumps({"schema_version": "shopsimrl-skillbank-v1", "bank_version": "b1", "skills": [
        {"id": "search-first", "version": "2", "content": "### 搜索 - 先搜索\n先用核心品类词搜索。"}]}), "utf-8")
    bank = SkillBank.load(bank_file)
    payloads = [completion(("search", {"query": QUERY}), reasoning="think"), completion(("click", {"value": ASIN})),
                completion(("click", {"value": OPTION})), completion(("click", {"value": "buy now"}))]
    record, model, env = run(world, payloads, skills=bank)
    assert record["status"] == "completed" and record["error"] is None
    assert record["final"]["done"] is True and record["final"]["reward"] == 1.0
    assert record["final"]["termination_reason"] == "purchase"
    assert actions(record) == [f"search[{QUERY}]", f"click[{ASIN}]", f"click[{OPTION}]", "click[buy now]"]
    assert [call["seed"] for call in model.calls] == [100, 101, 102, 103]
    assert [t["function"]["name"] for t in record["steps"][0]["tools"]] == ["search"]
    click = record["steps"][1]["tools"][-1]["function"]
    assert click["name"] == "click" and ASIN in click["parameters"]["properties"]["value"]["enum"]
    conv = record["conversation"]
    assert [m["role"] for m in conv] == ["system", "user"] + ["assistant", "tool"] * 4
    assert conv[3]["tool_call_id"] == conv[2]["tool_calls"][0]["id"] and conv[2]["content"] is None
    assert conv[3]["content"] == record["steps"][0]["environment"]["observation"]
    assert "reasoning_content" not in conv[2]  # reasoning is kept in the step, never echoed
    assert record["steps"][0]["model"]["reasoning"] == "think"
    assert "env_idx" not in record["reset"] and "lease_id" not in record["reset"]
    assert "private_task_instruction" not in record["reset"] and "goal_options" not in record["reset"]
    assert "<skill id=\"search-first\" version=\"2\">" in conv[0]["content"]
    assert conv[0]["content"].endswith(render_skills(bank.select(0)))
    assert record["selected_skills"][0]["skill_id"] == "search-first"
    assert len(record["selected_skills"][0]["content_sha256"]) == 64
    assert env.terminations == [] and env.closed == 1
    assert record["steps"][0]["observation"] == conv[1]["content"]
    assert record["steps"][1]["observation"] == record["steps"][0]["environment"]["observation"]
    json.dumps(record)  # a trace is plain JSON


def test_prompt_sections_follow_the_contract(world):
    record, _, _ = run(world, [completion(("search", {"query": QUERY}))], max_steps=1)
    reset = record["reset"]
    persona = reset["user_persona"]
    assert persona and "__reasoning__" not in persona
    system = record["conversation"][0]["content"]
    assert system == f"{SYSTEM_PROMPT}\n\n{PERSONA_HEADER}\n{persona_line(persona)}"
    assert persona_line(persona) == json.dumps(persona, ensure_ascii=False, sort_keys=True)
    assert "\n" not in persona_line(persona)
    user = record["conversation"][1]["content"]
    assert user == first_user_message(reset["task_instruction"], reset["observation"])
    assert user.startswith("购物任务：\n" + reset["task_instruction"] + "\n\n页面：搜索首页")
    assert system_message({}, None) == SYSTEM_PROMPT  # no persona, no skills: the rules alone
    context = context_from_messages(record["conversation"][:2], record["steps"][0]["tools"])
    assert context.instruction == reset["task_instruction"] and dict(context.persona) == persona


def test_action_limit_uses_the_environment_terminal(world):
    record, _, env = run(world, [completion(("search", {"query": QUERY})), completion(("click", {"value": "back to search"}))],
                         max_steps=2)
    assert env.terminations == ["action_limit"]
    assert record["status"] == "completed" and record["final"]["termination_reason"] == "action_limit"
    assert record["final"]["reward"] == 0 and len(record["steps"]) == 2


def test_generation_length_is_a_scored_zero_reward_policy_failure(world):
    cut = completion(content=None, finish="length", reasoning="long thinking")
    record, _, env = run(world, [cut])
    assert env.terminations == ["generation_length"]
    assert record["status"] == "completed" and record["final"]["reward"] == 0
    assert record["final"]["termination_reason"] == "generation_length"
    (step,) = record["steps"]
    assert step["policy_failure"]["code"] == "generation_length" and "protocol_error" not in step
    assert step["action"] is None and step["environment"] is None
    assert step["model"]["reasoning"] == "long thinking" and step["model"]["raw_response"]["id"] == "cmpl-1"


def test_length_with_exactly_one_call_is_executed(world):
    record, _, env = run(world, [completion(("search", {"query": QUERY}), finish="length")], max_steps=1)
    assert actions(record) == [f"search[{QUERY}]"] and env.terminations == ["action_limit"]


def test_text_only_answer_is_repaired_with_a_user_message(world):
    payloads = [completion(content="Action: search[小吃车]", finish="stop"), completion(("search", {"query": QUERY})),
                completion(("click", {"value": ASIN}))]
    record, model, _ = run(world, payloads, max_steps=3, seed=50)
    assert [call["seed"] for call in model.calls] == [50, 51, 52]
    assert len(record["steps"]) == 3 and len(actions(record)) == 2
    first = record["steps"][0]
    assert first["protocol_error"]["code"] == "tool_call_count"
    assert first["action"] is None and first["environment"] is None
    assert first["model"]["content"] == "Action: search[小吃车]"
    conv = record["conversation"]
    assert conv[2] == {"role": "assistant", "content": "Action: search[小吃车]"}
    assert conv[3]["role"] == "user"
    feedback = json.loads(conv[3]["content"])
    assert feedback == first["protocol_feedback"]
    assert feedback["type"] == "tool_protocol_error" and feedback["available_tools"] == ["search"]
    assert feedback["instruction"] == REPAIR_INSTRUCTION
    # the repair turn sees the same page and the same tools
    assert model.calls[1]["tools"] == model.calls[0]["tools"]
    assert record["steps"][1]["observation"] == record["reset"]["observation"]


def test_wrong_argument_keys_are_repaired_with_a_tool_message(world):
    payloads = [completion(("search", {"wrong": QUERY})), completion(("search", {"query": QUERY})),
                completion(("click", {"value": ASIN}))]
    record, _, _ = run(world, payloads, max_steps=3)
    assert record["steps"][0]["protocol_error"]["code"] == "invalid_tool_arguments"
    conv = record["conversation"]
    assert conv[2]["role"] == "assistant" and conv[2]["tool_calls"][0]["function"]["arguments"] == json.dumps(
        {"wrong": QUERY}, ensure_ascii=False)
    assert conv[3]["role"] == "tool" and conv[3]["tool_call_id"] == conv[2]["tool_calls"][0]["id"]
    assert json.loads(conv[3]["content"])["code"] == "invalid_tool_arguments"
    assert actions(record) == [f"search[{QUERY}]", f"click[{ASIN}]"]


def test_two_calls_get_one_feedback_message_each(world):
    payloads = [completion(("search", {"query": QUERY}), ("search", {"query": "x"})), completion(("search", {"query": QUERY}))]
    record, _, _ = run(world, payloads, max_steps=2)
    conv = record["conversation"]
    assert record["steps"][0]["protocol_error"]["code"] == "tool_call_count"
    assert [m["role"] for m in conv[2:5]] == ["assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in conv[3:5]] == ["call-0", "call-1"]


def test_click_outside_the_enum_still_reaches_the_environment(world):
    payloads = [completion(("search", {"query": QUERY})), completion(("click", {"value": "92"}))]
    record, _, _ = run(world, payloads, max_steps=2)
    step = record["steps"][1]
    assert "protocol_error" not in step and step["action"] == "click[92]"
    feedback = step["environment"]["action_feedback"]
    assert feedback["valid"] is False and feedback["reason"] == "unavailable_action"


def test_model_exception_fails_the_episode_with_its_stage(world):
    class Broken(ScriptedModel):
        async def generate(self, messages, tools, *, seed=0, task_id=None):
            raise ConnectionError("model went away")

    environment = CountingEnvironment(world)
    runtime = AgentRuntime(Broken([]), environment)
    record = asyncio.run(runtime.run(EpisodeJob(task_id=0)))
    assert record["status"] == "failed" and record["final"] is None
    assert record["error"]["stage"] == "model_step_1" and record["error"]["type"] == "ConnectionError"
    assert "model went away" in record["error"]["traceback"]
    assert environment.closed == 1  # always released


def test_unknown_task_fails_at_reset(world):
    record, _, env = run(world, [], task_id=999_999)
    assert record["status"] == "failed" and record["error"]["stage"] == "reset" and env.closed == 1
