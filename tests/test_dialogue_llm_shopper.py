"""The LLM shopper (issue 16 item 4) against the project's own OpenAI-compatible server speaking the real protocol.

``policy-server --policy rule-shopper`` answers shopper chat completions with the rule shopper's text, so a
dialogue played through the LLM shopper (official ``openai`` client, real uvicorn) must give exactly the rule
shopper's dialogue. Checked here: the replies and outcomes equal a ``--shopper rule`` run; a rerun replays the
cache without a single request; a failing endpoint fails the episode at ``shopper_step_k`` with no made-up
reply; the prompt carries no hidden field; an unconfigured ``shopper="llm"`` is a typed error (400 over HTTP);
and the dialogue policies served by ``policy-server`` score as in process (the oracle 100%).
"""

from __future__ import annotations

import json
import shutil

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from error_kinds import raises_kind
from live_server import serve
from shopsimrl.agent.model_client import ModelSettings
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.dialogue import LLMShopperSettings, ShopperEndpoint
from shopsimrl.dialogue.llm_prompt import OPENING_REQUEST, conversation_start, task_instruction
from shopsimrl.dialogue.llm_shopper import MAX_REPLY_CHARS, clean_reply
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.dialogue.reply_cache import CACHE_DIRNAME, ReplyCache, cache_key
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.errors import RequestError, ShopperCallError
from shopsimrl.eval import EvalSettings, evaluate
from shopsimrl.eval.compare import check_alignment
from shopsimrl.eval.rundir import latest_records
from shopsimrl.server import create_app

MODEL = "shopsim-rule-shopper"


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def shopper_server(world):
    app = create_policy_app(world, policy="rule-shopper")
    with serve(app) as url:
        yield app, url


def settings(url, **extra):
    return LLMShopperSettings(base_url=f"{url}/v1", model=MODEL, max_retries=0, **extra)


def run(prepared_dir, out, *, shopper="llm", policy="dialogue-oracle", **kwargs):
    base = {"data": str(prepared_dir), "out": str(out), "split": "all", "policy": policy, "shopper": shopper,
            "max_steps": 40, "concurrency": 2}
    return evaluate(EvalSettings(**{**base, **kwargs}))


def dialogues(out):
    records = latest_records(out / "traces.jsonl")
    return {eid: (r["dialogue"]["opening"], [(t["question"], t["reply"]) for t in r["dialogue"]["turns"]],
                  r["final"]["reward"], r["final"]["termination_reason"])
            for eid, r in sorted(records.items())}


def test_llm_shopper_plays_the_rule_shoppers_dialogue_and_replays_its_cache(world, prepared_dir, shopper_server,
                                                                              tmp_path):
    app, url = shopper_server
    rule = run(prepared_dir, tmp_path / "rule", shopper="rule")
    before = app.state.requests
    llm = run(prepared_dir, tmp_path / "llm", shopper_llm=settings(url))
    calls = app.state.requests - before
    assert llm.summary["counts"]["failed"] == 0 and llm.summary["counts"]["completed"] == len(world.catalog.split("all"))
    assert dialogues(tmp_path / "llm") == dialogues(tmp_path / "rule")  # the scripted endpoint is the rule shopper
    assert llm.summary["dialogue"]["questions"] == rule.summary["dialogue"]["questions"] > 0
    assert llm.summary["dialogue"]["slot_recall"] == rule.summary["dialogue"]["slot_recall"]  # read from replies
    assert llm.summary["primary"]["success_rate"] == rule.summary["primary"]["success_rate"] > 0
    # one request per question plus one per opening, each cached under the run directory
    assert calls == llm.summary["dialogue"]["questions"] + llm.summary["counts"]["completed"]
    cache = tmp_path / "llm" / CACHE_DIRNAME
    assert len(list(cache.glob("*/*.json"))) == calls
    plan = json.loads((tmp_path / "llm" / "manifest.json").read_text("utf-8"))
    assert plan["plan"]["environment"]["shopper"] == "llm"
    assert plan["plan"]["environment"]["shopper_llm"]["model"] == MODEL

    # a repeated run (fresh traces, same run directory) replays every reply: zero requests, the same dialogue
    for name in ("manifest.json", "traces.jsonl", "summary.json"):
        (tmp_path / "llm" / name).unlink()
    replayed = run(prepared_dir, tmp_path / "llm", shopper_llm=settings(url))
    assert app.state.requests - before == calls
    assert replayed.summary["counts"]["completed"] == llm.summary["counts"]["completed"]
    assert dialogues(tmp_path / "llm") == dialogues(tmp_path / "rule")
    transcripts = [r["dialogue"]["transcript"] for r in latest_records(tmp_path / "llm" / "traces.jsonl").values()]
    assert all(entry["cached"] for transcript in transcripts for entry in transcript)

    # determinism: a second run directory (no cache) asks again and gets byte-identical dialogues
    again = run(prepared_dir, tmp_path / "again", shopper_llm=settings(url))
    assert app.state.requests - before == 2 * calls and again.summary["counts"]["failed"] == 0
    assert dialogues(tmp_path / "again") == dialogues(tmp_path / "llm")

    # compare: two runs of one LLM shopper pair up; another shopper model or the rule shopper does not
    plans = {name: json.loads((tmp_path / name / "manifest.json").read_text("utf-8"))["plan"]
             for name in ("llm", "again", "rule")}
    assert check_alignment(plans["llm"], plans["again"])["problems"] == []
    assert "environment shopper differs (llm vs rule)" in check_alignment(plans["llm"], plans["rule"])["problems"]
    other = json.loads(json.dumps(plans["again"]))
    other["environment"]["shopper_llm"]["model"] = "another-model"
    assert any("shopper model differs" in p for p in check_alignment(plans["llm"], other)["problems"])
    moved = json.loads(json.dumps(plans["again"]))
    moved["environment"]["shopper_llm"]["base_url"] = "http://elsewhere/v1"
    assert not any("shopper" in p for p in check_alignment(plans["llm"], moved)["problems"])


def test_the_prompt_carries_only_the_shoppers_knowledge(world, shopper_server):
    app, url = shopper_server
    env = ShopEnv(world, shoppers=shopper_registry(llm=settings(url)))
    checked = 0
    for task_id in world.catalog.split("all"):
        goal = world.catalog.goal(task_id)
        product = world.catalog.products_by_asin[goal["asin"]].raw
        env.reset(task_id, shopper="llm")
        env.step("ask_user[你的预算是多少？]")
        env.step("ask_user[可以直接下单吗？]")
        sent = app.state.last_request
        assert sent["temperature"] == 0 and sent["model"] == MODEL and "seed" in sent and "tools" not in sent
        text = json.dumps(sent["messages"], ensure_ascii=False)
        for hidden in (goal["asin"], product["title"], product["shop_name"]):
            if hidden not in goal["instruction_text"]:  # (a fixture title may be the instruction's own words)
                assert hidden not in text
                checked += 1
        system = sent["messages"][0]["content"]
        assert task_instruction(system) == goal["instruction_text"]
        assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert sent["messages"][1]["content"] == OPENING_REQUEST
    assert checked >= 2 * len(world.catalog.split("all"))


def test_a_failed_shopper_call_fails_the_episode_at_its_question(world, prepared_dir, shopper_server, tmp_path):
    _, url = shopper_server
    for index, fault in ((0, "http_500"), (2, "http_500"), (1, "empty_reply")):
        out = tmp_path / f"fault-{index}-{fault}"
        broken = settings(url, extra_body={"shopsim_fault_script": {str(index): fault}})
        result = run(prepared_dir, out, shopper_llm=broken, limit=1)
        assert result.summary["counts"]["failed"] == 1
        record = next(iter(latest_records(out / "traces.jsonl").values()))
        assert record["status"] == "failed"
        assert record["error"]["stage"] == f"shopper_step_{index}"
        assert record["error"]["type"] == "ShopperCallError"
        # only the questions answered before the failure have replies: nothing was made up
        asked = [step for step in record["steps"] if step.get("dialogue")]
        assert len(asked) == max(index - 1, 0)
        assert all(step["dialogue"]["reply"] for step in asked)


def test_a_failed_call_leaves_the_episode_as_it_was(world, shopper_server):
    _, url = shopper_server
    task_id = world.catalog.split("all")[0]
    broken = ShopEnv(world, shoppers=shopper_registry(
        llm=settings(url, extra_body={"shopsim_fault_script": {"1": "http_500"}})))
    start = broken.reset(task_id, shopper="llm")
    with pytest.raises(ShopperCallError) as failure:
        broken.step("ask_user[预算多少？]")
    assert failure.value.stage == "shopper_step_1"
    state = broken.observation_state()
    assert state["dialogue"]["questions_asked"] == 0 and broken.session.action_count == 0
    assert broken.observation() == start["observation"]
    unreachable = ShopEnv(world, shoppers=shopper_registry(llm=LLMShopperSettings(
        base_url="http://127.0.0.1:9/v1", model=MODEL, max_retries=0, timeout=5.0)))
    with pytest.raises(ShopperCallError, match="shopper_step_0"):
        unreachable.reset(task_id, shopper="llm")


def test_llm_shopper_without_an_endpoint_is_a_typed_error(world, prepared_dir, tmp_path):
    task_id = world.catalog.split("all")[0]
    with raises_kind(RequestError, "dialogue_unavailable", match="needs an LLM shopper endpoint"):
        ShopEnv(world, shoppers=shopper_registry()).reset(task_id, shopper="llm")
    with raises_kind(RequestError, "dialogue_unavailable", match="unknown shopper"):
        ShopEnv(world, shoppers=shopper_registry()).reset(task_id, shopper="gpt")
    with pytest.raises(Exception, match="--shopper-base-url"):
        EvalSettings(data=str(prepared_dir), out=str(tmp_path / "x"), policy="dialogue-oracle", shopper="llm")
    with serve(create_app(world, slots=2)) as base:
        reference = httpx.post(f"{base}/api/shop_agent", json={"action": "reset", "idx": task_id, "shopper": "llm"})
        assert reference.status_code == 400 and "needs an LLM shopper endpoint" in reference.json()["error"]
        created = httpx.post(f"{base}/v1/sessions", json={"task_id": task_id, "shopper": "llm"})
        assert created.status_code == 400 and "needs an LLM shopper endpoint" in json.dumps(created.json())
        assert httpx.get(f"{base}/healthz").json()  # no slot was taken by the refused resets


def test_llm_shopper_over_both_http_apis(world, prepared_dir, shopper_server, tmp_path):
    app, url = shopper_server
    task_id = world.catalog.split("all")[0]
    endpoint = ShopperEndpoint(settings(url, cache_dir=str(tmp_path / "service-cache")))
    with serve(create_app(world, slots=4, llm_shopper=endpoint)) as base:
        created = httpx.post(f"{base}/v1/sessions", json={"task_id": task_id, "shopper": "llm", "shopper_seed": 7})
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["shopper"] == "llm" and body["task_instruction"] == "" and body["shopper_opening"]
        assert app.state.last_request["seed"] == 7
        step = httpx.post(f"{base}/v1/sessions/{body['session_id']}/step", json={"action": "ask_user[预算多少？]"})
        assert step.status_code == 200 and step.json()["shopper_reply"]
        reset = httpx.post(f"{base}/api/shop_agent", json={"action": "reset", "idx": task_id, "shopper": "llm"})
        assert reset.status_code == 200 and reset.json()["result"]["shopper_opening"] == body["shopper_opening"]
        # eval against the service: the same dialogue as in process
        run(prepared_dir, tmp_path / "inproc", shopper_llm=settings(url))
        served = run(prepared_dir, tmp_path / "served", env_url=base)
        assert served.summary["counts"]["failed"] == 0
        assert dialogues(tmp_path / "served") == dialogues(tmp_path / "inproc")
    broken = ShopperEndpoint(settings(url, extra_body={"shopsim_fault_script": {"1": "http_500"}}))
    with serve(create_app(world, slots=2, llm_shopper=broken)) as base:
        failed = run(prepared_dir, tmp_path / "served-fault", env_url=base, limit=1)
        record = next(iter(latest_records(tmp_path / "served-fault" / "traces.jsonl").values()))
        assert failed.summary["counts"]["failed"] == 1 and record["error"]["stage"] == "shopper_step_1"
        assert record["error"]["type"] == "ShopperCallError"


@pytest.mark.parametrize("policy", ["dialogue-oracle", "dialogue-heuristic"])
def test_dialogue_policies_served_by_the_policy_server(world, prepared_dir, tmp_path, policy):
    inproc = run(prepared_dir, tmp_path / "inproc", shopper="rule", policy=policy, split="test")
    with serve(create_policy_app(world, policy=policy)) as url:
        model = ModelSettings(base_url=f"{url}/v1", model=f"shopsim-{policy}", max_retries=0,
                              send_task_id=policy == "dialogue-oracle")
        served = run(prepared_dir, tmp_path / "served", shopper="rule", policy=None, model=model, split="test")
    assert served.summary["counts"]["failed"] == 0
    assert dialogues(tmp_path / "served") == dialogues(tmp_path / "inproc")
    assert served.summary["primary"]["success_rate"] == inproc.summary["primary"]["success_rate"]
    if policy == "dialogue-oracle":
        assert served.summary["primary"]["success_rate"] == 1.0


def test_the_served_dialogue_oracle_needs_its_task_id(world, prepared_dir, tmp_path):
    with serve(create_policy_app(world, policy="dialogue-oracle")) as url:
        model = ModelSettings(base_url=f"{url}/v1", model="shopsim-dialogue-oracle", max_retries=0)
        result = run(prepared_dir, tmp_path / "blind", shopper="rule", policy=None, model=model, limit=1)
    record = next(iter(latest_records(tmp_path / "blind" / "traces.jsonl").values()))
    assert result.summary["counts"]["failed"] == 1 and "cannot find a task" in record["error"]["message"]


def test_the_scripted_shopper_refuses_what_is_not_a_shopper_conversation(world, shopper_server):
    _, url = shopper_server
    goal = world.catalog.goal(world.catalog.split("all")[0])
    bad = [
        [{"role": "user", "content": "hi"}],  # no shopper system prompt
        [conversation_start(goal)[0], {"role": "user", "content": "别的开场"}],  # not the opening request
        [*conversation_start(goal), {"role": "assistant", "content": "x"}],  # ends with the shopper
    ]
    for messages in bad:
        answer = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL, "messages": messages})
        assert answer.status_code == 422, answer.text
    wrong = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL, "messages": conversation_start(goal),
                                                           "shopsim_fault": "bad_json"})
    assert wrong.status_code == 400 and "not for the shopper" in wrong.text


@given(st.text(max_size=4000))
def test_replies_are_bounded_single_lines(text):
    reply = clean_reply(text)
    assert len(reply) <= MAX_REPLY_CHARS and "\n" not in reply and reply == reply.strip()
    assert "<think>" not in clean_reply(f"<think>{text}</think>好的")


def test_cache_keys_follow_everything_that_shapes_a_reply(tmp_path):
    base = LLMShopperSettings(base_url="http://a/v1", model="m")
    messages = [{"role": "user", "content": OPENING_REQUEST}]
    key = cache_key({**base.sampling(), "seed": 0, "messages": messages})
    moved = LLMShopperSettings(base_url="http://b/v1", model="m")
    assert cache_key({**moved.sampling(), "seed": 0, "messages": messages}) == key  # the address is not the model
    for other in (
        {**LLMShopperSettings(base_url="http://a/v1", model="n").sampling(), "seed": 0, "messages": messages},
        {**base.sampling(), "seed": 1, "messages": messages},
        {**base.sampling(), "seed": 0, "messages": [*messages, {"role": "assistant", "content": "x"}]},
        {**LLMShopperSettings(base_url="http://a/v1", model="m", max_tokens=9).sampling(), "seed": 0,
         "messages": messages},
    ):
        assert cache_key(other) != key
    cache = ReplyCache(tmp_path)
    assert cache.get(key) is None
    cache.put(key, "嗯，好的。", "stop")
    assert cache.get(key) == "嗯，好的。"
    path = next(tmp_path.glob("*/*.json"))
    path.write_text("{not json", "utf-8")
    assert cache.get(key) is None  # a damaged entry is a miss, never a crash
    shutil.rmtree(tmp_path / key[:2])
    with raises_kind(RequestError, "dialogue_unavailable", match="may not set"):
        LLMShopperSettings(base_url="http://a/v1", model="m", extra_body={"temperature": 1})


def test_eval_command_with_the_llm_shopper(prepared_dir, shopper_server, tmp_path, capsys, monkeypatch):
    from shopsimrl.cli import main

    app, url = shopper_server
    out = tmp_path / "cli"
    common = ["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "dialogue-oracle", "--shopper", "llm",
              "--out", str(out), "--no-progress", "--no-report"]
    endpoint = ["--shopper-base-url", f"{url}/v1", "--shopper-model", MODEL]
    assert main([*common, *endpoint, "--shopper-extra-body", '{"shopsim_note": 1}']) == 0
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["primary"]["success_rate"] == 1.0 and summary["dialogue"]["questions"] > 0
    assert app.state.last_request["shopsim_note"] == 1
    assert list((out / CACHE_DIRNAME).glob("*/*.json"))
    capsys.readouterr()
    assert main(common) == 2  # no endpoint
    assert "--shopper-base-url" in capsys.readouterr().err
    assert main([*common, "--shopper-base-url", f"{url}/v1"]) == 2  # the model is missing
    assert "go together" in capsys.readouterr().err
    assert main([*common, *endpoint, "--shopper-extra-body", "[1]"]) == 2
    assert "JSON object" in capsys.readouterr().err
    monkeypatch.delenv("SHOPSIM_TEST_SHOPPER_KEY", raising=False)
    assert main([*common, *endpoint, "--shopper-api-key-env", "SHOPSIM_TEST_SHOPPER_KEY"]) == 2
    assert "SHOPSIM_TEST_SHOPPER_KEY" in capsys.readouterr().err


QUESTION_PARTS = ["预算", "多少钱", "颜色", "尺码", "规格", "要求", "还有别的吗", "可以下单吗", "需要防水吗", "你好", "款式",
                  "材质", "多大", "？"]


@given(st.lists(st.lists(st.sampled_from(QUESTION_PARTS), min_size=1, max_size=3).map("".join), max_size=8),
       st.integers(0, 1), st.integers(-5, 5))
def test_the_scripted_shopper_replays_a_conversation_as_the_rule_shopper_answers_it(world, questions, which, seed):
    """The policy server rebuilds the rule shopper's state from the conversation alone (no session)."""
    from shopsimrl.agent.shopper_backend import ScriptedShopper
    from shopsimrl.dialogue import RuleShopper, ShopperConfig

    task_id = world.catalog.split("all")[which]
    goal = world.catalog.goal(task_id)
    rule = RuleShopper(goal, world.catalog.products_by_asin[goal["asin"]].raw, ShopperConfig(sample_seed=seed))
    scripted = ScriptedShopper(world)
    messages = conversation_start(goal)
    opening = scripted.reply(messages, seed=seed)
    assert opening == rule.opening()
    messages.append({"role": "assistant", "content": opening})
    for question in questions:
        messages.append({"role": "user", "content": question})
        answer = scripted.reply(messages, seed=seed)
        assert answer == rule.reply(question).text
        messages.append({"role": "assistant", "content": answer})


def test_shopper_seed_is_the_llm_request_seed_and_needs_a_shopper(world, shopper_server):
    app, url = shopper_server
    task_id = world.catalog.split("all")[0]
    env = ShopEnv(world, shoppers=shopper_registry(llm=settings(url)))
    env.reset(task_id, shopper="llm", shopper_seed=11)
    assert app.state.last_request["seed"] == 11
    env.reset(task_id, shopper="llm")
    assert app.state.last_request["seed"] == 0  # ShopperConfig.sample_seed
    with raises_kind(RequestError, "dialogue_unavailable", match="needs shopper"):
        env.reset(task_id, shopper_seed=3)


def test_gymnasium_env_with_the_llm_shopper(world, shopper_server):
    from shopsimrl.env.gym import ShopGymEnv

    _, url = shopper_server
    task_id = world.catalog.split("all")[0]
    gym_env = ShopGymEnv(world, shopper="llm", shoppers=shopper_registry(llm=settings(url)))
    _, info = gym_env.reset(options={"task_id": task_id})
    rule = ShopEnv(world, shoppers=shopper_registry()).reset(task_id, shopper="rule")
    assert info["shopper_opening"] == rule["shopper_opening"]
    _, _, _, _, step_info = gym_env.step("ask_user[预算多少？]")
    assert step_info["shopper_reply"]


def test_an_unreachable_shopper_fails_the_run_once_before_the_first_episode(prepared_dir, tmp_path, capsys):
    """Issue 28 item 3: nothing listening at --shopper-base-url is one error up front, not a failure per episode."""
    import socket
    import time

    from shopsimrl.cli import main

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    out = tmp_path / "down"
    started = time.monotonic()
    code = main(["eval", "--data", str(prepared_dir), "--split", "all", "--policy", "dialogue-oracle",
                 "--shopper", "llm", "--shopper-base-url", f"http://127.0.0.1:{port}/v1", "--shopper-model", MODEL,
                 "--out", str(out), "--no-progress", "--no-report"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--shopper-base-url" in err and "cannot be reached" in err
    assert not (out / "traces.jsonl").exists()
    assert time.monotonic() - started < 60
