"""ShopSimRL through the real ``openenv`` package (0.10.x): WebSocket episodes, sessions, discovery, no goal leak.

These tests need the ``openenv`` extra, which cannot share a venv with verifiers (mcp<2 vs mcp==2.0.0):
``tests/test_openenv_venv.py`` builds ``.venv-openenv`` from the registry and runs this file there. In the dev
venv the whole module is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from error_kinds import raises_kind

openenv = pytest.importorskip("openenv", reason="runs in .venv-openenv (see tests/test_openenv_venv.py)")

import httpx  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from live_server import serve  # noqa: E402
from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment, RuntimeConfig  # noqa: E402
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel, policy_action  # noqa: E402
from shopsimrl.agent.policies import make_policy  # noqa: E402
from shopsimrl.agent.prompt import first_user_message, system_message  # noqa: E402
from shopsimrl.dialogue.registry import shopper_registry  # noqa: E402
from shopsimrl.env import ShopEnv, ShopWorld  # noqa: E402
from shopsimrl.errors import EpisodeStateError, RequestError  # noqa: E402
from shopsimrl.openenv import (  # noqa: E402
    ShopSimAction,
    ShopSimClient,
    ShopSimEnvironment,
    ShopSimSessionFactory,
    create_openenv_app,
)
from shopsimrl.versions import ENVIRONMENT_VERSION, EPISODE_LIMITS  # noqa: E402

SLOTS = 3
PRIVATE_KEYS = {"goal", "goal_options", "private_task_instruction", "reason_key", "attributes_goal", "target_asin"}


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def url(world):
    with serve(create_openenv_app(world, slots=SLOTS)) as base:
        yield base


def _walk_keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk_keys(item)


def assert_no_goal(payload, world, task_id):
    """No private key anywhere, and no private text (persona tasks hide the full instruction)."""
    keys = set(_walk_keys(payload))
    assert not keys & PRIVATE_KEYS, keys & PRIVATE_KEYS
    goal = world.catalog.goal(task_id)
    text = json.dumps(payload, ensure_ascii=False)
    if goal.get("user_persona") and goal["instruction_text"] != goal["instruction_simple"]:
        assert goal["instruction_text"] not in text
    for option in goal.get("goal_options") or ():
        if isinstance(option, str) and len(option) > 6:
            assert json.dumps(list(goal["goal_options"]), ensure_ascii=False) not in text


def messages_for(observation):
    visible = observation.shopper_opening if observation.shopper_opening is not None else observation.task_instruction
    return [
        {"role": "system", "content": system_message(observation.user_persona or {})},
        {"role": "user", "content": first_user_message(visible or "", observation.page_text)},
    ]


async def drive(client, policy, task_id, *, payloads=None, shopper=None, messages=None):
    """One episode of a built-in policy over the OpenEnv WebSocket, the conversation built as the runtime does."""
    result = await (client.reset(task_id=task_id, shopper=shopper) if shopper else client.reset(task_id=task_id))
    observation = result.observation
    if payloads is not None:
        payloads.append(observation.model_dump())
    messages = messages if messages is not None else []
    messages.extend(messages_for(observation))
    for step in range(EPISODE_LIMITS["multi_turn" if shopper else "single_turn"]):
        action = policy_action(policy, messages, observation.tools, seed=step, task_id=task_id)
        call_id = f"call_{step}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": action.name, "arguments": json.dumps(dict(action.arguments), ensure_ascii=False)}}]})
        result = await client.step(ShopSimAction(tool=action.name, arguments=dict(action.arguments)))
        observation = result.observation
        if payloads is not None:
            payloads.append(observation.model_dump())
        messages.append({"role": "tool", "tool_call_id": call_id, "content": observation.page_text})
        if result.done:
            return result
    return result


def in_process(world, policy_name, task_id, shopper=None):
    config = RuntimeConfig(max_steps=40, interaction_mode="multi_turn", shopper=shopper) if shopper else None
    runtime = AgentRuntime(BuiltinPolicyModel.named(policy_name, world), InProcessEnvironment(world), config=config)
    return asyncio.run(runtime.run(EpisodeJob(task_id=task_id)))


def test_websocket_episode_to_a_purchase_with_the_right_reward(world, url):
    task_id = world.catalog.split("test")[0]
    expected = in_process(world, "oracle", task_id)["final"]
    payloads = []

    async def go():
        async with ShopSimClient(base_url=url) as client:
            final = await drive(client, make_policy("oracle", world), task_id, payloads=payloads)
            return final, await client.state()

    final, state = asyncio.run(go())
    assert final.done and final.reward == expected["reward"] > 0
    assert final.observation.metadata["r_strict"] == expected["reward_detail"]["r_strict"]
    assert set(final.observation.metadata) <= {"r_loose", "r_strict", "r_success", "r_type", "r_att", "r_option",
                                               "r_price", "target_asin_match", "price_verifiable"}
    assert all(p["reward"] == 0.0 for p in payloads[:-1]) and all(not p["metadata"] for p in payloads[:-1])
    assert all(p["shopper_opening"] is None and p["shopper_reply"] is None for p in payloads)
    assert state.done and state.termination_reason == "purchase" and state.task_id == task_id
    assert state.environment_version == ENVIRONMENT_VERSION and state.action_limit == 30
    for payload in [*payloads, state.model_dump()]:
        assert_no_goal(payload, world, task_id)


def test_heuristic_over_openenv_matches_in_process(world, url):
    """The same policy, the same prompts: rewards per task are identical over the WebSocket and in-process."""
    tasks = list(world.catalog.split("test")) + list(world.catalog.split("val"))
    heuristic = make_policy("heuristic", world)

    async def go():
        out = {}
        for task_id in tasks:
            async with ShopSimClient(base_url=url) as client:
                out[task_id] = (await drive(client, heuristic, task_id)).reward or 0.0
        return out

    over_ws = asyncio.run(go())
    expected = {t: (in_process(world, "heuristic", t)["final"] or {}).get("reward", 0.0) for t in tasks}
    assert over_ws == expected
    assert any(expected.values()), "the fixture should give the heuristic at least one success"


def test_two_concurrent_sessions_are_isolated(world, url):
    first, second = world.catalog.split("test")[:2]

    async def go():
        async with ShopSimClient(base_url=url) as a, ShopSimClient(base_url=url) as b:
            ra = await a.reset(task_id=first)
            rb = await b.reset(task_id=second)
            await a.step(ShopSimAction(tool="search", arguments={"query": "手机"}))
            sa, sb = await a.state(), await b.state()
            again = await b.step(ShopSimAction(tool="click", arguments={"value": "back to search"}))
            return ra, rb, sa, sb, again

    ra, rb, sa, sb, again = asyncio.run(go())
    assert (sa.task_id, sb.task_id) == (first, second)
    assert sa.episode_id != sb.episode_id or sa.episode_id is None
    assert (sa.step_count, sb.step_count) == (1, 0)
    assert ra.observation.task_instruction != rb.observation.task_instruction
    # b is still on its home page: clicking is not offered there, so the step is refused, not a's results page
    assert again.observation.action_feedback["valid"] is False
    assert again.observation.observation_state["page_type"] == rb.observation.observation_state["page_type"]


def test_capacity_reached_is_answered_with_openenvs_error(url):
    ws_url = url.replace("http://", "ws://") + "/ws"
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(connect(ws_url)) for _ in range(SLOTS)]
        for ws in held:  # each session exists once its reset is answered
            ws.send(json.dumps({"type": "reset", "data": {"split": "test", "index": 0}}))
            assert json.loads(ws.recv())["type"] == "observation"
        with connect(ws_url) as extra:
            answer = json.loads(extra.recv())
        assert answer["type"] == "error" and answer["data"]["code"] == "CAPACITY_REACHED"
        assert answer["data"]["max_sessions"] == SLOTS
    with connect(ws_url) as again:  # slots come back when sessions close
        again.send(json.dumps({"type": "reset", "data": {"split": "test", "index": 0}}))
        assert json.loads(again.recv())["type"] == "observation"


def test_task_discovery_gives_ids_only(world, url):
    with httpx.Client(base_url=url) as http:
        splits = http.get("/shopsim/splits").json()
        assert {s["name"] for s in splits} == set(world.catalog.split_names)
        ids = list(world.catalog.split("test"))
        tasks = http.post("/shopsim/tasks", json={"split": "test"}).json()["tasks"]
        assert tasks == [{"id": t, "index": i} for i, t in enumerate(ids)]
        assert http.post("/shopsim/num_tasks", json={"split": "test"}).json() == {"num_tasks": len(ids)}
        assert http.post("/shopsim/task", json={"split": "test", "index": 1}).json() == {"task": {"id": ids[1], "index": 1}}
        assert http.post("/shopsim/task", json={"split": "test", "index": len(ids)}).status_code == 400
        metadata = http.get("/metadata").json()
        assert metadata["version"] == ENVIRONMENT_VERSION and "reward_version" in metadata["description"]
        for payload in (splits, tasks, metadata):
            assert not set(_walk_keys(payload)) & PRIVATE_KEYS


def test_reset_by_split_and_index_and_errors(world, url):
    ids = world.catalog.split("val")

    async def go():
        async with ShopSimClient(base_url=url) as client:
            await client.reset(split="val", index=1)
            return await client.state()

    assert asyncio.run(go()).task_id == ids[1]
    env = ShopSimEnvironment(world)
    with raises_kind(RequestError, "invalid_request"):
        env.reset(split="val", index=len(ids))
    with raises_kind(EpisodeStateError, "no_active_episode", match=r"^no active episode: call reset\(task_id\) first$"):
        env.step(ShopSimAction(tool="search", arguments={"query": "x"}))  # ShopEnv's error and message
    with raises_kind(RequestError, "unknown_task") as caught:  # ShopEnv's errors pass through the adapter unchanged
        env.reset(task_id=10**9)
    with raises_kind(RequestError, "unknown_task") as direct:
        ShopEnv(world, shoppers=shopper_registry()).reset(10**9)
    assert str(caught.value) == str(direct.value)
    with raises_kind(RequestError, "invalid_request", match="unsupported interaction_mode"):
        env.reset(task_id=ids[0], interaction_mode="three_turn")
    with pytest.raises(ValueError):  # pydantic: only the three tools exist
        ShopSimAction(tool="checkout", arguments={})


def test_schema_endpoint_publishes_the_typed_models(url):
    schema = httpx.get(f"{url}/schema").json()
    assert schema["action"]["properties"]["tool"]["enum"] == ["search", "click", "ask_user"]
    assert {"page_text", "observation_state", "tools", "action_feedback", "task_instruction", "shopper_opening",
            "shopper_reply"} <= set(schema["observation"]["properties"])
    assert "shopper" in schema["state"]["properties"]
    state_fields = set(schema["state"]["properties"])
    assert {"task_id", "persona", "interaction_mode", "action_limit", "done", "termination_reason",
            "environment_version"} <= state_fields
    assert not state_fields & PRIVATE_KEYS and not any("goal" in f for f in state_fields)


def test_terminate_for_the_runner_and_the_tools_of_each_page(world):
    env = ShopSimEnvironment(world)
    first = env.reset(task_id=world.catalog.split("test")[0])
    assert [t["function"]["name"] for t in first.tools] == ["search"]
    page = env.step(ShopSimAction(tool="search", arguments={"query": "手机"}))
    click = next(t for t in page.tools if t["function"]["name"] == "click")
    assert click["function"]["parameters"]["properties"]["value"]["enum"] == page.observation_state["actions"]
    end = env.terminate("generation_length")
    assert end.done and end.reward == 0.0 and env.state.termination_reason == "generation_length"
    assert end.metadata["r_strict"] == 0.0


def test_harness_resource_session_runs_an_episode_and_verify_forwards_r_strict(world):
    task_id = world.catalog.split("test")[0]
    expected = in_process(world, "oracle", task_id)["final"]["reward"]
    factory = ShopSimSessionFactory(world)
    session = factory.create({"id": task_id, "index": 0})
    oracle = make_policy("oracle", world)
    messages = session.initial_messages()
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    assert session.verify(messages).env_reward == 0.0
    result = None
    for step in range(30):
        tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                   "parameters": t.input_schema}} for t in session.list_tools()]
        action = policy_action(oracle, messages, tools, seed=step, task_id=task_id)
        result = session.call_tool(action.name, dict(action.arguments))
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{step}", "type": "function",
            "function": {"name": action.name, "arguments": json.dumps(dict(action.arguments), ensure_ascii=False)}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": result.data})
        if result.done:
            break
    verdict = session.verify(messages)
    assert result.done and verdict.done and verdict.env_reward == expected
    assert not set(_walk_keys(verdict.metrics)) & PRIVATE_KEYS
    assert session.call_tool("search", {"query": "x"}).error
    session.close()
    with raises_kind(RequestError, "invalid_request"):
        factory.create("not a task")


def test_openenv_env_and_harness_hold_the_episode_shells_rules(world):
    """Every task, the loop's own episode (heuristic and random actions) replayed through OpenEnv's environment
    and its harness: the same pages, steps, end and public reward; after the end the harness answers with the
    shell's one message and the environment raises the engine's typed error."""
    from shopsimrl.agent.episode import EpisodeRequest
    from shopsimrl.agent.episode_shell import EPISODE_OVER, public_reward
    from shopsimrl.agent.play import play
    from shopsimrl.errors import EpisodeStateError

    engine = world.new_env(shoppers=shopper_registry())
    for name in ("heuristic", "random"):
        policy = make_policy(name, world)
        for task_id in world.catalog.split("all"):
            episode, hooks = play(engine, policy, EpisodeRequest(task_id), seed=task_id)
            final = episode.final
            env = ShopSimEnvironment(world)
            env.reset(task_id=task_id)
            session = ShopSimSessionFactory(world, per_page_tools=False).create(task_id)
            for turn in hooks.history:
                tool, _, value = turn.action[:-1].partition("[")
                key = {"search": "query", "click": "value"}[tool]
                assert env.step(ShopSimAction(tool=tool, arguments={key: value})).page_text == turn.observation
                assert session.call_tool(tool, {key: value}).data == turn.observation
            assert env.state.step_count == env.shell.steps == len(hooks.history)
            assert env.state.done and env.state.termination_reason == final["termination_reason"]
            verdict = session.verify([])
            assert verdict.done and verdict.env_reward == final["reward"]
            assert verdict.metrics == public_reward(final["reward_detail"]) == env.shell.public
            after = session.call_tool("search", {"query": "x"})
            assert after.error == EPISODE_OVER and after.done
            with raises_kind(EpisodeStateError, "episode_terminated"):
                env.step(ShopSimAction(tool="search", arguments={"query": "x"}))
            session.close()
            env.close()
    engine.close()


def test_serve_openenv_command_starts_openenvs_server(prepared_dir, tmp_path):
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "shopsimrl.cli", "serve-openenv", "--data", str(prepared_dir),
               "--port", str(port), "--slots", "2"]
    log = tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240  # importing OpenEnv (gradio) is slow on a busy machine
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                alive = process.poll() is None and time.monotonic() < deadline
                assert alive, f"server did not start: {log.read_text()[-2000:]}"
                time.sleep(0.2)
        assert health.status_code == 200
        with connect(f"ws://127.0.0.1:{port}/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {"split": "test", "index": 0}}))
            answer = json.loads(ws.recv())
        assert answer["type"] == "observation" and answer["data"]["observation"]["page_text"]
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_openenvs_mcp_harness_adapter_drives_an_episode_with_static_tools(world):
    """OpenEnv's own white-box adapter lists tools once: the static mode gives it search and click for the episode."""
    from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter, ModelStepResult
    from openenv.core.llm_client import LLMResponse, ToolCall

    from shopsimrl.agent.page_tools import page_tools

    task_id = world.catalog.split("test")[0]
    expected = in_process(world, "oracle", task_id)["final"]["reward"]
    oracle = make_policy("oracle", world)
    session = ShopSimSessionFactory(world, per_page_tools=False).create(task_id)
    listed = session.list_tools()
    assert [t.name for t in listed] == ["search", "click"] and "enum" not in str(listed[1].input_schema)

    def model_step(messages, tools, sampling):
        wire = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                  "parameters": t.input_schema}} for t in tools]
        page = page_tools(messages, wire)  # the page's own tools, read back from the page text
        action = policy_action(oracle, messages, page, task_id=task_id)
        call = ToolCall(id=f"c{len(messages)}", name=action.name, args=dict(action.arguments))
        return ModelStepResult(response=LLMResponse(content="", tool_calls=[call]))

    result = MCPHarnessAdapter().run_white_box(model_step, session, HarnessRunLimits(max_turns=30))
    verdict = session.verify(result.messages)
    assert result.done and verdict.done and verdict.env_reward == expected > 0


# --- dialogue mode (issue 16) -------------------------------------------------------------------------------

def test_dialogue_episode_over_the_websocket_matches_the_runtime(world, url):
    """``reset(shopper="rule")``: the opening instead of the instruction, ``ask_user`` among the tools, replies in
    the observation, the same actions and reward as ``eval --shopper rule`` in process, no goal in any payload."""
    tasks = list(world.catalog.split("test")) + list(world.catalog.split("val"))
    policy = make_policy("dialogue-heuristic", world)

    async def go(task_id):
        payloads, messages = [], []
        async with ShopSimClient(base_url=url) as client:
            final = await drive(client, policy, task_id, payloads=payloads, shopper="rule", messages=messages)
            return final, await client.state(), payloads, messages

    for task_id in tasks:
        final, state, payloads, messages = asyncio.run(go(task_id))
        expected = in_process(world, "dialogue-heuristic", task_id, shopper="rule")
        first = payloads[0]
        reset = world.new_env(shoppers=shopper_registry()).reset(task_id, shopper="rule")
        assert first["task_instruction"] == "" and first["shopper_opening"] == reset["shopper_opening"]
        assert messages[1] == expected["conversation"][1]  # the runtime's first user message: the opening
        assert [t["function"]["name"] for t in first["tools"]] == ["search", "ask_user"]
        answered = [p for p in payloads if p["shopper_reply"]]
        asked = [s for s in expected["steps"] if s["action"].startswith("ask_user[")]
        assert asked and len(answered) == len(asked)
        assert all(p["action_feedback"]["reply"] == p["shopper_reply"] for p in answered)
        assert all(p["observation_state"]["page_type"] == first["observation_state"]["page_type"]
                   for p in payloads[: len(asked) + 1])  # the questions come first and never change the page
        assert (final.reward or 0.0) == expected["final"]["reward"]
        assert state.shopper == "rule" and state.interaction_mode == "multi_turn" and state.action_limit == 40
        instruction = world.catalog.goal(task_id)["instruction_text"]
        for payload in [*payloads[:-1], state.model_dump()]:
            assert_no_goal(payload, world, task_id)
            assert instruction not in json.dumps(payload, ensure_ascii=False)
    with pytest.raises(ValueError, match="unknown shopper"):
        ShopSimEnvironment(world).reset(task_id=tasks[0], shopper="nobody")


def test_dialogue_through_openenvs_mcp_harness_adapter(world):
    """The harness session in dialogue mode: the opening as first user message, ``ask_user`` as a static tool
    (the environment's own whole-episode schema, as the chat templates render it), and OpenEnv's adapter driving the dialogue oracle to the gold purchase."""
    from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter, ModelStepResult
    from openenv.core.llm_client import LLMResponse, ToolCall

    from shopsimrl.agent.page_tools import page_tools
    from shopsimrl.env.tools import episode_tools

    task_id = world.catalog.split("test")[0]
    expected = in_process(world, "dialogue-oracle", task_id, shopper="rule")
    oracle = make_policy("dialogue-oracle", world)
    session = ShopSimSessionFactory(world, per_page_tools=False).create({"id": task_id, "shopper": "rule"})
    assert session.initial_messages() == expected["conversation"][:2]
    listed = session.list_tools()
    assert [t.name for t in listed] == ["search", "click", "ask_user"]
    for tool, schema in zip(listed, episode_tools(dialogue=True), strict=True):  # the one whole-episode list
        assert (tool.description, tool.input_schema) == (schema["function"]["description"],
                                                         schema["function"]["parameters"])
    asked = []

    def model_step(messages, tools, sampling):
        wire = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                  "parameters": t.input_schema}} for t in tools]
        page = page_tools(messages, wire)
        action = policy_action(oracle, messages, page, task_id=task_id)
        asked.append(action.name)
        call = ToolCall(id=f"c{len(messages)}", name=action.name, args=dict(action.arguments))
        return ModelStepResult(response=LLMResponse(content="", tool_calls=[call]))

    result = MCPHarnessAdapter().run_white_box(model_step, session, HarnessRunLimits(max_turns=40))
    verdict = session.verify(result.messages)
    assert "ask_user" in asked
    assert result.done and verdict.done and verdict.env_reward == expected["final"]["reward"] == 1.0
    per_page = ShopSimSessionFactory(world, shopper="rule").create(task_id)
    assert [t.name for t in per_page.list_tools()] == ["search", "ask_user"]
    reply = per_page.call_tool("ask_user", {"question": "你的预算是多少？"})
    assert not reply.error and "顾客回复" in reply.data and per_page.observation.shopper_reply


TASK_ROUTES = {  # every task route of OpenEnv's app with its body, and the field each mistake goes in
    "/shopsim/tasks": {"split": "test"},
    "/shopsim/num_tasks": {"split": "test"},
    "/shopsim/task": {"split": "test", "index": 0},
    "/shopsim/task_range": {"split": "test", "start": 0, "stop": 2},
}


@pytest.mark.parametrize("route", sorted(TASK_ROUTES))
@pytest.mark.parametrize("mistake", ["unknown split", "negative index", "wrong type", "not json"])
def test_every_task_route_answers_a_mistake_with_a_typed_4xx(url, route, mistake):
    """Issue 28 item 2: an unknown split used to be a 500 with a traceback (DataError was not mapped)."""
    body = dict(TASK_ROUTES[route])
    if mistake == "unknown split":
        body["split"] = "tst"
    elif mistake == "negative index":
        body.update({key: -1 for key in ("index", "start") if key in body} or {"split": -1})
    elif mistake == "wrong type":
        body.update({key: "zero" for key in ("index", "start") if key in body} or {"split": ["test"]})
    with httpx.Client(base_url=url) as http:
        if mistake == "not json":
            answer = http.post(route, content=b"{split", headers={"Content-Type": "application/json"})
        else:
            answer = http.post(route, json=body)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    payload = answer.json()
    assert set(payload) == {"detail", "code"} and isinstance(payload["detail"], str), payload
    if mistake == "unknown split":
        assert "unknown task split 'tst'" in payload["detail"] and payload["code"] == "invalid_split"
    if mistake == "negative index" and "index" in body:
        assert "-1" in payload["detail"]


@pytest.mark.parametrize(("body", "code"), [
    ({"split": "tst", "index": 0}, "invalid_split"),
    ({"split": "test", "index": -1}, "invalid_request"),
    ({"split": "test", "index": "zero"}, "invalid_request"),
    ({"task_id": "zero"}, "invalid_task_id"),
])
def test_http_reset_mistakes_share_the_shape(url, body, code):
    with httpx.Client(base_url=url) as http:
        answer = http.post("/reset", json=body)
    assert answer.status_code == 400 and answer.json()["code"] == code and set(answer.json()) == {"detail", "code"}


def test_routing_errors_share_the_shape(url):
    with httpx.Client(base_url=url) as http:
        for answer in (http.get("/nowhere"), http.get("/shopsim/task"), http.get("/other/splits")):
            assert answer.status_code in (404, 405) and set(answer.json()) == {"detail", "code"}, answer.text
