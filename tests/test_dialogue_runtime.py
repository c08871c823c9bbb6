"""Dialogue mode through the agent runtime and ``eval`` (issue 16 phase 2): ``ask_user`` routed by the single turn
definition, the shopper's reply fed back as the tool result, traces, summary metrics and cross-mode ``compare``."""

from __future__ import annotations

import asyncio
import json

import pytest

from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment, RuntimeConfig
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.policy import PolicyAction, context_from_messages
from shopsimrl.agent.validation import interpret
from shopsimrl.dialogue.replies import ALL_SAID, NEUTRAL_REPLY, PURCHASE_INCOMPLETE
from shopsimrl.env import ShopWorld
from shopsimrl.env.tools import tools_for_state
from shopsimrl.eval import EvalSettings, evaluate
from shopsimrl.eval.compare import check_alignment, compare_runs
from shopsimrl.eval.dialogue_metrics import dialogue_summary
from shopsimrl.eval.rundir import latest_records
from shopsimrl.versions import MAX_QUESTION_CHARS


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


def completion(name, args):
    call = {"id": "call-0", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
    return {"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                            "tool_calls": [call]}, "finish_reason": "tool_calls"}]}


class Scripted:
    model_name = "scripted"

    def __init__(self, payloads):
        self.payloads = list(payloads)
        self.sent = []

    def identity(self):
        return {"provider": "scripted", "model": self.model_name}

    async def generate(self, messages, tools, *, seed=0, task_id=None):
        self.sent.append((json.loads(json.dumps(messages)), [t["function"]["name"] for t in tools]))
        return interpret(self.payloads.pop(0), tools)

    async def close(self):
        return None


SEARCH_PAGE = {"page_type": "search", "search_available": True, "actions": []}
DIALOGUE_TOOLS = tools_for_state({**SEARCH_PAGE, "dialogue": {"ask_user_available": True}})


def test_ask_user_is_validated_like_any_offered_tool():
    ok = interpret(completion("ask_user", {"question": " 预算多少？ "}), DIALOGUE_TOOLS)
    assert ok.accepted and ok.canonical_action() == "ask_user[预算多少？]"
    for args in ({"question": ""}, {"question": "  "}, {"q": "预算"}, {"question": "预算", "x": 1},
                 {"question": "问" * (MAX_QUESTION_CHARS + 1)}):
        assert interpret(completion("ask_user", args), DIALOGUE_TOOLS).protocol_error["code"] == "invalid_tool_arguments"
    single = tools_for_state(SEARCH_PAGE)
    assert interpret(completion("ask_user", {"question": "预算？"}), single).protocol_error["code"] == "unavailable_tool"
    assert PolicyAction("ask_user", {"question": " 颜色？ "}).canonical == "ask_user[颜色？]"


def test_policy_context_rebuilds_ask_user_turns_from_messages():
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "购物任务：\n你好，我想买个便利贴。\n\n页面：搜索首页"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {
            "name": "ask_user", "arguments": json.dumps({"question": "预算？"}, ensure_ascii=False)}}]},
        {"role": "tool", "tool_call_id": "a", "content": "页面：搜索首页\n- 说明：顾客回复：16元上下。"},
    ]
    context = context_from_messages(messages, DIALOGUE_TOOLS)
    assert context.instruction == "你好，我想买个便利贴。"
    assert [turn.action for turn in context.history] == ["ask_user[预算？]"]


def test_runtime_routes_ask_user_with_repair_and_records_the_dialogue(world):
    task = world.catalog.split("all")[0]
    model = Scripted([completion("ask_user", {"question": ""}),          # repair: empty question
                      completion("ask_user", {"question": "预算是多少？"}),
                      completion("ask_user", {"question": "你喜欢什么天气？"})])  # neutral
    config = RuntimeConfig(max_steps=3, interaction_mode="multi_turn", shopper="rule")
    record = asyncio.run(AgentRuntime(model, InProcessEnvironment(world), config=config).run(EpisodeJob(task)))
    assert record["status"] == "completed", record["error"]
    goal = world.catalog.goal(task)
    first_user = model.sent[0][0][1]["content"]
    assert goal["instruction_text"] not in first_user and record["dialogue"]["opening"] in first_user
    assert "ask_user" in model.sent[0][1]
    steps = record["steps"]
    assert steps[0]["protocol_error"]["code"] == "invalid_tool_arguments" and steps[0]["action"] is None
    assert steps[1]["action"] == "ask_user[预算是多少？]"
    reply = steps[1]["dialogue"]["reply"]
    assert reply and reply != NEUTRAL_REPLY and steps[2]["dialogue"]["reply"] == NEUTRAL_REPLY
    tool_messages = [m for m in record["conversation"] if m["role"] == "tool"]
    assert reply in tool_messages[-2]["content"]  # the reply is the tool result
    dialogue = record["dialogue"]
    assert dialogue["shopper"] == "rule" and [t["question"] for t in dialogue["turns"]] == ["预算是多少？", "你喜欢什么天气？"]
    assert [t["question"] for t in dialogue["transcript"]] == ["预算是多少？", "你喜欢什么天气？"]
    assert dialogue["transcript"][0]["slots"] == ["budget"] and dialogue["transcript"][1]["slots"] == []
    assert record["final"]["termination_reason"] == "action_limit"


def test_eval_with_the_rule_shopper_records_it_and_the_dialogue_oracle_matches_the_oracle(world, prepared_dir, tmp_path):
    base = dict(data=str(prepared_dir), split="all", concurrency=2)
    dialogue = evaluate(EvalSettings(out=str(tmp_path / "do"), policy="dialogue-oracle", shopper="rule", max_steps=40,
                                     **base), world=world)
    single = evaluate(EvalSettings(out=str(tmp_path / "h"), policy="oracle", **base), world=world)
    env = dialogue.plan.plan["environment"]
    assert env["shopper"] == "rule" and env["interaction_mode"] == "multi_turn"
    assert "shopper" not in single.plan.plan["environment"] and "shopper" not in single.plan.plan["runtime"]
    assert dialogue.plan.fingerprint != single.plan.fingerprint
    summary = dialogue.summary
    # the fixture catalog has tasks no policy solves; asking every slot first loses none the oracle solves
    assert summary["primary"]["success_rate"] == single.summary["primary"]["success_rate"] > 0.5
    assert summary["dialogue"]["slot_recall"] == 1.0 and summary["dialogue"]["questions_per_episode"] > 0
    assert "dialogue" not in single.summary
    records = latest_records(tmp_path / "do" / "traces.jsonl")
    questions = sum(len(r["dialogue"]["turns"]) for r in records.values())
    assert summary["dialogue"]["questions"] == questions
    with pytest.raises(Exception, match="plan"):  # a run directory never mixes dialogue and single-turn traces
        evaluate(EvalSettings(out=str(tmp_path / "do"), policy="oracle", **base), world=world)
    result = compare_runs(str(tmp_path / "h"), str(tmp_path / "do"), resamples=200)
    assert result["alignment"]["ignored"] == ["environment interaction_mode", "runtime max_steps"]
    assert result["paired_episodes"] == summary["counts"]["completed"]
    assert result["transitions"]["fail_to_success"] == result["transitions"]["success_to_fail"] == 0


def test_the_dialogue_heuristic_is_registered_and_asks_first(world):
    policy = make_policy("dialogue-heuristic", world)
    from shopsimrl.agent.builtin_backend import BuiltinPolicyModel

    config = RuntimeConfig(max_steps=40, interaction_mode="multi_turn", shopper="rule")
    task = world.catalog.split("all")[0]
    record = asyncio.run(AgentRuntime(BuiltinPolicyModel(policy), InProcessEnvironment(world), config=config)
                         .run(EpisodeJob(task)))
    actions = [s["action"] for s in record["steps"]]
    assert actions[0].startswith("ask_user[") and any(a.startswith("search[") for a in actions)
    assert ALL_SAID in [t["reply"] for t in record["dialogue"]["turns"]]


def test_two_different_shoppers_are_not_comparable_but_shopper_vs_none_is():
    def plan(shopper, mode, steps):
        env = {"catalog": {"data_sha256": "c"}, "interaction_mode": mode}
        if shopper:
            env["shopper"] = shopper
        return {"task_split": {"name": "test"}, "jobs": [], "environment": env, "runtime": {"max_steps": steps}}

    assert check_alignment(plan(None, "single_turn", 30), plan("rule", "multi_turn", 40))["problems"] == []
    assert check_alignment(plan(None, "single_turn", 30), plan(None, "multi_turn", 40))["problems"]
    assert "environment shopper differs (rule vs llm)" in check_alignment(
        plan("rule", "multi_turn", 40), plan("llm", "multi_turn", 40))["problems"]


def test_dialogue_metrics_count_purchases_after_not_complete_and_unanswered_questions():
    incomplete = PURCHASE_INCOMPLETE.format(missing="预算")

    def record(replies, reason, revealed, total):
        steps = [{"step_index": i + 1, "dialogue": {"question": "q", "reply": r, "valid": True}}
                 for i, r in enumerate(replies)]
        steps.append({"step_index": 9, "dialogue": {"question": "", "reply": None, "valid": False}})
        return {"dialogue": {"turns": []}, "steps": steps,
                "final": {"termination_reason": reason,
                          "dialogue": {"slots_revealed": revealed, "slots_total": total}}}

    out = dialogue_summary([record(["嗯，要红色的。", incomplete], "purchase", 2, 4),
                            record([NEUTRAL_REPLY, incomplete], "action_limit", 1, 4),
                            record([], "purchase", 0, 2)])
    assert out["questions"] == 4 and out["questions_per_episode"] == pytest.approx(4 / 3)
    assert out["slot_recall"] == pytest.approx(3 / 10)
    assert out["episodes_told_incomplete"] == 2 and out["purchases_after_incomplete"] == 1
    assert out["unanswered_question_rate"] == pytest.approx(1 / 4)
    assert dialogue_summary([{"steps": [], "final": {}}]) is None


# ---------------------------------------------------------------- over HTTP (both APIs)
def _stable(record):
    out = json.loads(json.dumps(record))
    for key in ("started_at", "ended_at", "duration_ms", "provenance"):
        out.pop(key)
    out["final"].pop("idx")
    for step in out["steps"]:
        step["model"].pop("latency_ms")
        step["environment"].pop("idx")
    return out


def test_eval_over_http_with_a_shopper_matches_in_process(world, prepared_dir, tmp_path):
    from live_server import serve
    from shopsimrl.server import create_app

    base = dict(data=str(prepared_dir), split="all", concurrency=2, policy="dialogue-heuristic", shopper="rule",
                max_steps=40)
    evaluate(EvalSettings(out=str(tmp_path / "local"), **base), world=world)
    with serve(create_app(world, slots=2)) as url:
        remote = evaluate(EvalSettings(out=str(tmp_path / "remote"), env_url=url, **base), world=world)
    assert remote.summary["dialogue"]["questions"] > 0
    local_records = latest_records(tmp_path / "local" / "traces.jsonl")
    remote_records = latest_records(tmp_path / "remote" / "traces.jsonl")
    assert set(local_records) == set(remote_records)
    for eid, local in local_records.items():
        a, b = _stable(local), _stable(remote_records[eid])
        assert a["dialogue"]["transcript"]  # private, read after the episode: the same on every path
        assert a == b, eid


def test_both_http_apis_take_a_shopper(world):
    import httpx

    from live_server import serve
    from shopsimrl.server import ShopClient, create_app

    task = world.catalog.split("all")[0]
    with serve(create_app(world, slots=2)) as url, httpx.Client(base_url=url, timeout=30) as http:
        created = http.post("/v1/sessions", json={"task_id": task, "shopper": "rule"})
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["task_instruction"] == "" and body["shopper"] == "rule" and body["shopper_opening"]
        assert body["interaction_mode"] == "multi_turn" and "shopper_slots" not in body
        step = http.post(f"/v1/sessions/{body['session_id']}/step", json={"action": "ask_user[预算是多少？]"}).json()
        assert step["shopper_reply"] and step["dialogue"]["questions_asked"] == 1
        assert http.post("/v1/sessions", json={"task_id": task, "shopper": "gpt"}).status_code == 422
        assert http.post("/v1/sessions", json={"task_id": task, "shopper": "llm"}).status_code == 400  # no endpoint
        plain = http.post("/v1/sessions", json={"task_id": task}).json()
        assert "shopper" not in plain and plain["task_instruction"]
        http.post("/api/shop_agent", json={"action": "release_all"})
        bad = http.post("/api/shop_agent", json={"action": "reset", "idx": task, "shopper": "llm"})
        assert bad.status_code == 400 and "shopper" in bad.json()["error"]
        client = ShopClient(url)
        try:
            reset = client.reset(task, shopper="rule")
            assert reset["shopper_opening"] == body["shopper_opening"] and client.step("ask_user[颜色？]")["shopper_reply"]
        finally:
            client.close()
