"""Build ``tests/data/runs/fixture-run`` (docs/contract.md#run-directories): a small recorded experiment for the replay UI tests.

Episodes are played for real with ``ShopEnv`` on the fixture catalog by a scripted "model" (tool calls with
reasoning), so every observation, feedback and reward in the traces is the engine's own. Timestamps are fixed
(no wall clock), so the output is byte-stable. The run deliberately holds: a successful purchase, a wrong-product
purchase with an invalid action and a protocol error, a failed attempt followed by a retried episode (the last
line wins), a pending job and a truncated tail line.

Usage: python tests/data/make_fixture_run.py [--out tests/data/runs/fixture-run]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from shopsimrl.catalog.prepare import PrepareOptions, prepare_dataset
from shopsimrl.env.shop_env import ShopEnv, ShopWorld

HERE = Path(__file__).parent
ARCHIVE = HERE / "fixture_catalog.json"
LEASE_KEYS = ("env_idx", "lease_id", "private_task_instruction", "goal_options", "reason_key")
MODEL = {"model_id": "scripted-fixture-policy", "provider": "none", "temperature": 0.0}
SYSTEM = "你是一个购物助手。使用 search 和 click 工具完成用户的购买任务。"

# (task_id, sample_id, persona, [(reasoning, tool, argument) | ("protocol", text)], terminate_reason | None)
SCRIPTS: list[tuple[int, int, bool, list[tuple[str, ...]], str | None]] = [
    (0, 0, True, [
        ("用户要一款可移动、三个锅的小吃车，先搜索。", "search", "可移动小吃车 煤气灶 三个锅"),
        ("第一个结果就是三锅的流动小吃车，打开看看。", "click", "824100258497"),
        ("需要关东煮和油炸，选这个规格。", "click", "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"),
        ("规格齐了，价格在预算内，购买。", "click", "buy now"),
    ], None),
    (9, 0, True, [
        ("要防水睫毛膏，搜索。", "search", "卷翘 睫毛膏"),
        ("protocol", "我觉得第一个不错。"),
        ("第一个便宜，打开。", "click", "611000000002"),
        ("先试试直接购买。", "click", "buy now"),
        ("需要先选颜色，选黑色。", "click", "颜色分类=黑色"),
        ("买下。", "click", "buy now"),
    ], None),
    (3, 0, False, [
        ("找静音的宿舍冰箱。", "search", "宿舍 静音 冰箱"),
        ("打开第一个看看。", "click", "000000000003"),
    ], "action_limit"),
]
PENDING_JOB = (14, 0)


def _tools(env: ShopEnv) -> list[dict[str, Any]]:
    return env.tools()


def _call(index: int, name: str, argument: str) -> dict[str, Any]:
    key = "query" if name == "search" else "value"
    return {"id": f"call_{index:03d}", "type": "function",
            "function": {"name": name, "arguments": json.dumps({key: argument}, ensure_ascii=False)}}


def _usage(step: int) -> dict[str, Any]:
    prompt = 900 + 160 * step
    return {"prompt_tokens": prompt, "completion_tokens": 48, "total_tokens": prompt + 48,
            "completion_tokens_details": {"reasoning_tokens": 0}}


def play(world: ShopWorld, task: int, sample: int, persona: bool, script: list[tuple[str, ...]],
         terminate: str | None, *, started_at: str, ended_at: str, duration_ms: int) -> dict[str, Any]:
    env = world.new_env()
    reset = env.reset(task, persona=persona, session_id=f"slot-0-{task}")
    first_user = f"{reset['task_instruction']}\n\n{reset['observation']}"
    conversation: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_user}]
    steps: list[dict[str, Any]] = []
    observation, final = first_user, None
    for number, entry in enumerate(script, start=1):
        tools = _tools(env)
        record: dict[str, Any] = {"step_index": number, "observation": observation, "tools": tools}
        if entry[0] == "protocol":
            record["model"] = {"content": entry[1], "reasoning": None, "tool_calls": [], "usage": _usage(number)}
            record.update(action=None, environment=None, protocol_error="missing_tool_call",
                          protocol_feedback="请调用 search 或 click 工具。")
            conversation += [{"role": "assistant", "content": entry[1]},
                             {"role": "user", "content": record["protocol_feedback"]}]
            observation = record["protocol_feedback"]
        else:
            reasoning, name, argument = entry
            call = _call(number, name, argument)
            action = f"{name}[{argument}]"
            result = env.step(action)
            record["model"] = {"content": "", "reasoning": reasoning, "tool_calls": [call], "usage": _usage(number)}
            record.update(action=action, environment=result)
            conversation += [{"role": "assistant", "content": "", "tool_calls": [call]},
                             {"role": "tool", "tool_call_id": call["id"], "content": result["observation"]}]
            observation, final = result["observation"], result
        steps.append(record)
        if final is not None and final["done"]:
            break
    if terminate is not None:
        final = env.terminate(terminate)
        final.update(reward=0.0, message=f"Episode terminated: {terminate}")
    public_reset = {k: v for k, v in reset.items() if k not in LEASE_KEYS}
    return {
        "schema_version": "shopsimrl-episode-v4",
        "episode_id": f"task-{task:06d}__sample-{sample:03d}",
        "status": "completed" if final is not None and final["done"] else "failed",
        "job": {"task_id": task, "sample_id": sample, "seed": 1000 * task + sample, "split": "fixture"},
        "provenance": {
            "model": MODEL,
            "environment": {"adapter": "in_process", "base_url": None, "persona": persona,
                            "interaction_mode": "single_turn", "environment_version": reset["environment_version"],
                            "observation_version": reset["observation_state"]["observation_version"]},
            "prompt": {"version": "fixture-prompt-v1"}, "skills": {"version": None},
            "runtime": {"max_steps": 30, "action_protocol": "openai-function-tools-repair-v3"},
        },
        "started_at": started_at, "ended_at": ended_at, "duration_ms": duration_ms,
        "reset": public_reset,
        "selected_skills": [],
        "conversation": conversation,
        "steps": steps,
        "final": copy.deepcopy(final) if final is not None else None,
        "error": None,
    }


def build(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "fixture"
        prepare_dataset(ARCHIVE, data, options=PrepareOptions(test_size=2, val_size=2))
        world = ShopWorld.from_data_dir(data)
        episodes = [
            play(world, task, sample, persona, script, terminate,
                 started_at=f"2026-01-01T00:0{i}:00+00:00", ended_at=f"2026-01-01T00:0{i}:05+00:00",
                 duration_ms=5000 + 250 * i)
            for i, (task, sample, persona, script, terminate) in enumerate(SCRIPTS)
        ]
    failed = copy.deepcopy(episodes[2])  # an earlier attempt at the same job that failed; the retry follows it
    failed.update(status="failed", steps=failed["steps"][:1], final=None, duration_ms=30000,
                  error={"type": "TimeoutError", "stage": "model", "message": "model call timed out"})
    lines = [episodes[0], failed, episodes[1], episodes[2]]
    jobs = [{"task_id": t, "sample_id": s, "seed": 1000 * t + s, "split": "fixture"}
            for t, s in [(e["job"]["task_id"], e["job"]["sample_id"]) for e in episodes] + [PENDING_JOB]]
    plan = {
        "pipeline_version": "shopsimrl-v0.4", "experiment": "fixture-run", "model_id": MODEL["model_id"],
        "model": MODEL, "task_split": {"name": "fixture", "path": None, "version": None, "persona": True,
                                       "task_count": len(jobs)},
        "jobs": jobs, "environment": {"environment_version": episodes[0]["reset"]["environment_version"]},
        "runtime": {"max_steps": 30, "concurrency": 1, "action_protocol": "openai-function-tools-repair-v3"},
        "prompt": {"version": "fixture-prompt-v1"}, "skills": {"version": None},
    }
    canonical = json.dumps(plan, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    manifest = {"schema_version": "shopsimrl-run-manifest-v1", "created_at": "2026-01-01T00:00:00+00:00",
                "plan_fingerprint": hashlib.sha256(canonical.encode()).hexdigest(), "plan": plan}
    completed = [e for e in episodes if e["status"] == "completed" and e["final"]["done"]]
    strict = [e["final"]["reward_detail"].get("r_strict", e["final"]["reward"]) for e in completed]
    success = [e["final"]["reward_detail"].get("r_success", 0) for e in completed]
    model_steps = sum(len(e["steps"]) for e in episodes)
    actions = sum(1 for e in episodes for s in e["steps"] if s["environment"] is not None)
    invalid = sum(1 for e in episodes for s in e["steps"]
                  if s["environment"] is not None and s["environment"]["action_feedback"]["valid"] is False)
    protocol = sum(1 for e in episodes for s in e["steps"] if s.get("protocol_error"))
    mean = sum(strict) / len(strict)
    sem = (sum((r - mean) ** 2 for r in strict) / (len(strict) - 1)) ** 0.5 / len(strict) ** 0.5
    summary = {
        "schema_version": "shopsimrl-eval-summary-v2",
        "counts": {"requested": len(jobs), "trace_files": 1, "completed": len(completed), "failed": 0,
                   "scored": len(completed), "coverage": len(completed) / len(jobs)},
        "primary": {"reward_mean": mean, "reward_sem": sem, "success_rate": sum(success) / len(success)},
        "behavior": {"steps_mean": model_steps / len(episodes), "model_steps": model_steps, "protocol_errors": protocol,
                     "protocol_error_rate": protocol / model_steps, "policy_failures": 0, "policy_failure_rate": 0.0,
                     "invalid_actions": invalid, "total_actions": actions, "invalid_action_rate": invalid / actions,
                     "termination_reasons": {e["final"]["termination_reason"]: 1 for e in completed}},
        "cost": {"duration_ms_mean": sum(e["duration_ms"] for e in episodes) / len(episodes)},
        "errors": {},
    }
    out.mkdir(parents=True, exist_ok=True)
    dump = {"ensure_ascii": False, "sort_keys": True}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, **dump) + "\n", "utf-8")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, **dump) + "\n", "utf-8")
    body = "".join(json.dumps(line, separators=(",", ":"), **dump) + "\n" for line in lines)
    (out / "traces.jsonl").write_text(body + '{"schema_version":"shopsimrl-episode-v4","episode_id":"task-0000', "utf-8")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(HERE / "runs" / "fixture-run"))
    build(Path(parser.parse_args().out))


if __name__ == "__main__":
    main()
