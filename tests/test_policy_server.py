"""End to end through ``policy-server`` (a real uvicorn server) and the official ``openai`` client.

Every protocol-error class, the repair path, generation_length, action_limit, HTTP retries and the content
fallbacks go over the wire exactly as with a served model; the built-in policy behind the server must act
exactly as it does in-process.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from openai import OpenAI

from live_server import serve
from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment, RuntimeConfig
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel
from shopsimrl.agent.model_client import ModelSettings, OpenAIChatModel
from shopsimrl.agent.policy_server import OUTSIDE_ENUM_VALUE, FaultConfig, create_policy_app
from shopsimrl.env import ShopWorld


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def heuristic_url(world):
    with serve(create_policy_app(world, policy="heuristic")) as url:
        yield url


def episode(world, url, *, model="shopsim-heuristic", extra_body=None, max_steps=30, task_id=0, **settings):
    settings.setdefault("max_retries", 0)
    backend = OpenAIChatModel(ModelSettings(base_url=f"{url}/v1", model=model, extra_body=extra_body or {}, **settings))
    runtime = AgentRuntime(backend, InProcessEnvironment(world), config=RuntimeConfig(max_steps=max_steps))

    async def go():
        try:
            return await runtime.run(EpisodeJob(task_id=task_id))
        finally:
            await runtime.close()

    return asyncio.run(go())


def script(**turns):
    return {"shopsim_fault_script": {str(turn.lstrip("t")): kind for turn, kind in turns.items()}}


def test_models_endpoint_and_a_clean_episode(world, heuristic_url):
    client = OpenAI(base_url=f"{heuristic_url}/v1", api_key="EMPTY")
    assert [m.id for m in client.models.list().data] == ["shopsim-heuristic"]
    record = episode(world, heuristic_url)
    assert record["status"] == "completed", record["error"]
    assert record["final"]["termination_reason"] == "purchase"
    step = record["steps"][0]
    assert step["model"]["finish_reason"] == "tool_calls" and step["model"]["usage"]["total_tokens"] > 0
    assert step["model"]["reasoning"].startswith("heuristic")
    assert all("protocol_error" not in s for s in record["steps"])


@pytest.mark.parametrize(("fault", "turn", "code", "feedback_role"), [
    ("no_tool_call", 1, "tool_call_count", "user"),
    ("two_calls", 1, "tool_call_count", "tool"),
    ("mixed_content", 1, "mixed_content", "tool"),
    ("bad_json", 1, "invalid_arguments_json", "tool"),
    ("unavailable_tool", 1, "unavailable_tool", "tool"),
    ("wrong_keys", 2, "invalid_tool_arguments", "tool"),
])
def test_each_protocol_error_is_repaired(world, heuristic_url, fault, turn, code, feedback_role):
    clean = episode(world, heuristic_url)
    record = episode(world, heuristic_url, extra_body=script(**{f"t{turn}": fault}))
    assert record["status"] == "completed", record["error"]
    bad = record["steps"][turn - 1]
    assert bad["protocol_error"]["code"] == code
    assert bad["action"] is None and bad["environment"] is None
    assert bad["protocol_feedback"]["type"] == "tool_protocol_error"
    # the repair costs one turn and then the episode goes on exactly as without the fault
    assert len(record["steps"]) == len(clean["steps"]) + 1
    assert [s["action"] for s in record["steps"] if s["action"]] == [s["action"] for s in clean["steps"]]
    assert record["final"]["reward"] == clean["final"]["reward"]
    roles = [m["role"] for m in record["conversation"]]
    feedback_index = 2 + 2 * (turn - 1) + 1
    assert roles[feedback_index] == feedback_role or roles[feedback_index + 1] == feedback_role
    if fault == "two_calls":
        assert roles[feedback_index:feedback_index + 2] == ["tool", "tool"]


def test_click_outside_the_enum_is_an_invalid_environment_action(world, heuristic_url):
    record = episode(world, heuristic_url, extra_body=script(t2="click_outside_enum"))
    step = record["steps"][1]
    assert "protocol_error" not in step and step["action"] == f"click[{OUTSIDE_ENUM_VALUE}]"
    assert step["environment"]["action_feedback"] == {**step["environment"]["action_feedback"],
                                                      "valid": False, "reason": "unavailable_action"}
    assert record["status"] == "completed" and record["final"]["termination_reason"] == "purchase"


def test_length_cut_ends_with_generation_length(world, heuristic_url):
    record = episode(world, heuristic_url, extra_body=script(t2="length"), max_tokens=64)
    assert record["status"] == "completed"
    assert record["final"]["termination_reason"] == "generation_length" and record["final"]["reward"] == 0
    assert record["steps"][-1]["policy_failure"]["code"] == "generation_length"
    assert record["steps"][-1]["model"]["usage"]["completion_tokens"] == 64
    assert len(record["steps"]) == 2


def test_length_with_one_complete_call_is_executed(world, heuristic_url):
    record = episode(world, heuristic_url, extra_body=script(t1="length_with_call"))
    assert record["steps"][0]["model"]["finish_reason"] == "length" and record["steps"][0]["action"]
    assert record["final"]["termination_reason"] == "purchase"


def test_action_limit(world, heuristic_url):
    record = episode(world, heuristic_url, max_steps=2)
    assert record["status"] == "completed" and len(record["steps"]) == 2
    assert record["final"]["termination_reason"] == "action_limit" and record["final"]["reward"] == 0


@pytest.mark.parametrize("fault", ["content_tool_call", "content_tool_call_xml"])
def test_tool_calls_in_the_content_are_parsed(world, heuristic_url, fault):
    clean = episode(world, heuristic_url)
    record = episode(world, heuristic_url, extra_body=script(t1=fault, t3=fault))
    assert [s["action"] for s in record["steps"]] == [s["action"] for s in clean["steps"]]
    assert record["steps"][0]["model"]["metadata"]["tool_call_source"] == "content"


def test_transient_http_errors_are_retried(world, heuristic_url):
    record = episode(world, heuristic_url, extra_body={"shopsim_fault": "http_429_once"}, max_retries=2)
    assert record["status"] == "completed" and record["final"]["termination_reason"] == "purchase"
    failed = episode(world, heuristic_url, extra_body={"shopsim_fault": "http_500_once"}, max_retries=0)
    assert failed["status"] == "failed" and failed["error"]["stage"] == "model_step_1"
    assert failed["error"]["type"] == "ModelCallError" and "500" in failed["error"]["message"]


def test_unknown_model_and_fault_are_clear_errors(world, heuristic_url):
    record = episode(world, heuristic_url, model="no-such-model")
    assert record["status"] == "failed" and "404" in record["error"]["message"]
    record = episode(world, heuristic_url, extra_body={"shopsim_fault": "nonsense"})
    assert record["status"] == "failed" and "unknown fault" in record["error"]["message"]


@pytest.mark.parametrize("policy", ["heuristic", "random", "oracle"])
def test_policies_act_identically_behind_the_server(world, policy):
    """Same context (rebuilt from the messages) → same actions, in-process and over HTTP.

    The random policy is seeded per turn, so its run sends the per-turn seeds over the wire (--send-seed).
    """
    with serve(create_policy_app(world, policy=policy)) as url:
        for task_id in world.catalog.split("all")[:6]:
            local = AgentRuntime(BuiltinPolicyModel.named(policy, world), InProcessEnvironment(world))
            mine = asyncio.run(local.run(EpisodeJob(task_id=task_id, seed=0)))
            remote = episode(world, url, model=f"shopsim-{policy}", task_id=task_id, send_seed=policy == "random")
            assert [s["action"] for s in remote["steps"]] == [s["action"] for s in mine["steps"]]
            assert remote["final"]["reward_detail"] == mine["final"]["reward_detail"]
            if policy == "oracle" and task_id == 0:  # the worked example is solvable
                assert mine["final"]["reward_detail"]["r_success"] == 1


def test_server_wide_fault_rate_is_deterministic(world):
    faults = FaultConfig(rate=0.5, seed=7, length_rate=0.0)
    with serve(create_policy_app(world, policy="heuristic", faults=faults)) as url:
        runs = [[episode(world, url, task_id=t) for t in world.catalog.split("all")[:4]] for _ in range(2)]
    codes = [[[(s.get("protocol_error") or {}).get("code") for s in r["steps"]] for r in run] for run in runs]
    assert codes[0] == codes[1]
    assert any(code for episode_codes in codes[0] for code in episode_codes)


def test_request_carries_sampling_tools_and_extra_body_at_top_level(world):
    app = create_policy_app(world, policy="heuristic")
    with serve(app) as url:
        episode(world, url, extra_body={"enable_thinking": True}, max_steps=1)
        body = app.state.last_request
        assert body["enable_thinking"] is True and "chat_template_kwargs" not in body
        assert body["tool_choice"] == "auto" and [t["function"]["name"] for t in body["tools"]] == ["search"]
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.6, 1.0, 4096)
        assert "seed" not in body and body["model"] == "shopsim-heuristic"
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        episode(world, url, send_seed=True, max_steps=1)
        assert app.state.last_request["seed"] == 0


# ---------------------------------------------------------------- streaming (stream=true, server-sent events)
def _first_request(world, task_id=0):
    from shopsimrl.agent.prompt import first_user_message, system_message

    env = world.new_env()
    reset = env.reset(task_id)
    messages = [
        {"role": "system", "content": system_message(reset["user_persona"])},
        {"role": "user", "content": first_user_message(reset["task_instruction"], reset["observation"])},
    ]
    return messages, env.tools()


def test_streaming_answer_matches_the_plain_one_with_tool_call_deltas(world, heuristic_url):
    client = OpenAI(base_url=f"{heuristic_url}/v1", api_key="EMPTY", max_retries=0)
    messages, tools = _first_request(world)
    plain = client.chat.completions.create(model="shopsim-heuristic", messages=messages, tools=tools)
    chunks = list(client.chat.completions.create(
        model="shopsim-heuristic", messages=messages, tools=tools, stream=True,
        stream_options={"include_usage": True},
    ))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    call_parts = [part for d in deltas for part in (d.tool_calls or [])]
    assert len(call_parts) >= 2, "the arguments should arrive as several tool-call deltas"
    assert call_parts[0].id == plain.choices[0].message.tool_calls[0].id
    name = "".join(p.function.name or "" for p in call_parts)
    arguments = "".join(p.function.arguments or "" for p in call_parts)
    expected = plain.choices[0].message.tool_calls[0].function
    assert (name, arguments) == (expected.name, expected.arguments)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == plain.usage.total_tokens


def test_streaming_with_the_client_stream_helper_and_an_injected_fault(world, heuristic_url):
    client = OpenAI(base_url=f"{heuristic_url}/v1", api_key="EMPTY", max_retries=0)
    messages, tools = _first_request(world)
    with client.chat.completions.stream(model="shopsim-heuristic", messages=messages, tools=tools) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "search" and json.loads(call.function.arguments)["query"]
    faulty = list(client.chat.completions.create(
        model="shopsim-heuristic", messages=messages, tools=tools, stream=True,
        extra_body={"shopsim_fault": "no_tool_call"},
    ))
    text = "".join(c.choices[0].delta.content or "" for c in faulty if c.choices)
    assert text.startswith("Thought:") and all(not c.choices[0].delta.tool_calls for c in faulty if c.choices)
    assert faulty[-1].choices[0].finish_reason == "stop"


def test_streaming_errors_stay_http_errors(heuristic_url):
    import openai

    client = OpenAI(base_url=f"{heuristic_url}/v1", api_key="EMPTY", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}],
                                       tools=[], stream=True)


def test_the_model_client_streaming_path_runs_the_same_episode(world, heuristic_url):
    plain = episode(world, heuristic_url, task_id=1)
    streamed = episode(world, heuristic_url, task_id=1, stream=True)
    assert streamed["status"] == "completed", streamed["error"]
    assert [s["action"] for s in streamed["steps"]] == [s["action"] for s in plain["steps"]]
    assert streamed["final"]["reward"] == plain["final"]["reward"]
    faulty = episode(world, heuristic_url, task_id=1, stream=True, extra_body=script(t1="bad_json"))
    assert faulty["steps"][0]["protocol_error"] and faulty["status"] == "completed"


STATIC_TOOLS = [  # what a harness that lists MCP tools once per episode sends: no per-page enum
    {"type": "function", "function": {"name": "search", "description": "search",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                     "required": ["query"]}}},
    {"type": "function", "function": {"name": "click", "description": "click",
                                      "parameters": {"type": "object", "properties": {"value": {"type": "string"}},
                                                     "required": ["value"]}}},
]


def test_static_tools_get_the_page_tools_rebuilt_from_the_page_text(world, heuristic_url):
    client = OpenAI(base_url=f"{heuristic_url}/v1", api_key="EMPTY", max_retries=0)
    record = episode(world, heuristic_url, task_id=0)
    assert record["final"]["termination_reason"] == "purchase"
    messages = record["conversation"]
    checked = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index < 2:
            continue
        step = record["steps"][checked]
        for tools in (STATIC_TOOLS, step["tools"]):
            answer = client.chat.completions.create(model="shopsim-heuristic", messages=messages[:index], tools=tools)
            call = answer.choices[0].message.tool_calls[0]
            assert f"{call.function.name}[{next(iter(json.loads(call.function.arguments).values()))}]" == step["action"]
        checked += 1
    assert checked == len(record["steps"]) >= 3
