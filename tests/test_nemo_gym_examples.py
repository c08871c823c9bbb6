"""NeMo Gym-style example data (``examples/nemo_gym/data``): made by ``scripts/nemo_gym_examples.py``, checked here.

Structure and consistency rather than fixed figures (the catalog changes): five rows and five rollouts of the
same tasks, Responses API shapes with paired function calls, rewards in range and some above 0, the metrics
file recomputed from the two others, stamps of the current code; and the script's builder run on the test
fixture gives the in-process rewards.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel
from shopsimrl.env import ShopWorld
from shopsimrl.generate import GENERATOR_VERSION
from shopsimrl.versions import ENVIRONMENT_VERSION

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "nemo_gym" / "data"


def _script():
    spec = importlib.util.spec_from_file_location("nemo_gym_examples", ROOT / "scripts" / "nemo_gym_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text("utf-8").splitlines() if line.strip()]


def _check_shapes(rows: list[dict], rollouts: list[dict]) -> None:
    assert [r["task_id"] for r in rows] == [r["task_id"] for r in rollouts]
    for row, rollout in zip(rows, rollouts, strict=True):
        params = row["responses_create_params"]
        assert [m["role"] for m in params["input"]] == ["system", "user"] and all(m["content"] for m in params["input"])
        assert params["tools"] and all(t["type"] == "function" and t["parameters"]["type"] == "object"
                                       for t in params["tools"])
        assert {k: v for k, v in rollout.items() if k in row} == row
        output = rollout["response"]["output"]
        calls = [item for item in output if item["type"] == "function_call"]
        answers = [item for item in output if item["type"] == "function_call_output"]
        assert calls and [c["call_id"] for c in calls] == [a["call_id"] for a in answers]
        assert all(isinstance(json.loads(c["arguments"]), dict) for c in calls)
        assert 0.0 <= rollout["reward"] <= 1.0


def test_committed_examples_are_consistent_and_current():
    rows, rollouts = _jsonl("example.jsonl"), _jsonl("example_rollouts.jsonl")
    metrics = json.loads((DATA / "example_metrics.json").read_text("utf-8"))
    assert len(rows) == len(rollouts) == metrics["Number of examples"] == 5
    _check_shapes(rows, rollouts)
    rewards = [r["reward"] for r in rollouts]
    assert any(r > 0 for r in rewards)
    assert metrics["reward"] == {"Mean": round(sum(rewards) / 5, 4), "Min": min(rewards), "Max": max(rewards)}
    assert metrics["success rate"] == round(sum(r["r_success"] for r in rollouts) / 5, 4)
    stamps = {key: rows[0][key] for key in metrics["stamps"]}
    assert all({key: row[key] for key in stamps} == stamps for row in rows) and stamps == metrics["stamps"]
    assert (stamps["environment_version"], stamps["generator_version"]) == (ENVIRONMENT_VERSION, GENERATOR_VERSION), \
        "regenerate: python scripts/nemo_gym_examples.py"
    assert "Apache-2.0" in (DATA.parent / "README.md").read_text("utf-8")


def test_the_script_builds_rows_whose_rollouts_score_like_the_runtime(prepared_dir):
    rows, rollouts, metrics = _script().build(prepared_dir, "heuristic", 2)
    _check_shapes(rows, rollouts)
    world = ShopWorld.from_data_dir(prepared_dir)
    runtime = AgentRuntime(BuiltinPolicyModel.named("heuristic", world), InProcessEnvironment(world))
    for row, rollout in zip(rows, rollouts, strict=True):
        record = asyncio.run(runtime.run(EpisodeJob(task_id=row["task_id"], split="test")))
        assert rollout["reward"] == record["final"]["reward"]
        assert row["responses_create_params"]["input"][0]["content"] == record["conversation"][0]["content"]
    assert metrics["stamps"]["generator_version"] is None  # the fixture was not generated
