"""ShopSimRL through the real ``verifiers`` package (0.4.x): the ``shopsim-env`` taskset and ``vf-eval``.

verifiers pins ``mcp==2.0.0`` and OpenEnv needs ``mcp<2``, so these tests run in ``.venv-verifiers`` (built by
``tests/test_verifiers_venv.py`` with the project and ``environments/shopsim_env`` installed); in the dev venv
the module is skipped. ``vf-eval`` runs locally (subprocess runtime, verifiers' plain chat harness, no push)
against ``shopsimrl policy-server`` (heuristic), which answers its streaming requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="runs in .venv-verifiers (see tests/test_verifiers_venv.py)")

from shopsim_env.taskset import ShopSimTaskset, ShopSimTasksetConfig

from live_server import serve
from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld

ROLLOUTS = 8
SPLIT = "all"
PRIVATE_KEYS = ("goal_options", "private_task_instruction", "reason_key", '"goal"')


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


def in_process(world, task_ids):
    runtime = AgentRuntime(BuiltinPolicyModel.named("heuristic", world), InProcessEnvironment(world))
    return {t: asyncio.run(runtime.run(EpisodeJob(task_id=t))) for t in task_ids}


def test_taskset_carries_the_runtimes_exact_prompts(world, prepared_dir):
    taskset = ShopSimTaskset(ShopSimTasksetConfig(id="shopsim-env", data=str(prepared_dir), split=SPLIT))
    tasks = list(taskset)
    assert [t.data.task_id for t in tasks] == list(world.catalog.split(SPLIT))
    records = in_process(world, [t.data.task_id for t in tasks[:4]])
    for task in tasks[:4]:
        conversation = records[task.data.task_id]["conversation"]
        assert task.data.system_prompt == conversation[0]["content"]
        assert task.data.prompt == conversation[1]["content"]
        assert task.data.id == str(task.data.task_id) and task.data.idx == tasks.index(task)


@pytest.fixture(scope="module")
def vf_eval_run(world, prepared_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("vf-eval")
    with serve(create_policy_app(world, policy="heuristic")) as url:
        command = [
            str(Path(sys.executable).parent / "vf-eval"), "shopsim-env",
            "--env.taskset.data", str(prepared_dir), "--env.taskset.split", SPLIT,
            "-m", "shopsim-heuristic", "--client.base-url", f"{url}/v1", "--client.api-key-var", "SHOPSIM_KEY",
            "-n", str(ROLLOUTS), "--no-push", "--no-rich", "-o", str(out),
        ]
        env = {**os.environ, "SHOPSIM_KEY": "EMPTY"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=out)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    (traces,) = out.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    return episodes, traces.read_text(), log


def test_vf_eval_runs_8_rollouts_with_no_errors_and_reports_r_strict(vf_eval_run):
    episodes, _, log = vf_eval_run
    assert len(episodes) == ROLLOUTS, log[-3000:]
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        assert not trace["errors"] and trace["stop_condition"] == "episode_over"
        assert set(trace["rewards"]) == {"r_strict"}
        assert {"r_loose", "r_type", "r_att", "r_option", "r_price", "purchased", "steps"} <= set(trace["metrics"])
        assert sorted(tool["name"] for tool in trace["tools"]) == ["click", "search"]


def test_heuristic_through_verifiers_matches_in_process(world, vf_eval_run):
    episodes, _, _ = vf_eval_run
    through = {e["traces"][0]["task"]["data"]["task_id"]: e["traces"][0]["rewards"]["r_strict"]["score"]
               for e in episodes}
    records = in_process(world, sorted(through))
    expected = {t: r["final"]["reward"] for t, r in records.items()}
    success = {name: sum(v == 1.0 for v in rewards.values()) / len(rewards)
               for name, rewards in (("verifiers", through), ("in-process", expected))}
    assert abs(success["verifiers"] - success["in-process"]) <= 0.05, (success, through, expected)
    assert through == expected  # deterministic policy and engine: the same reward on every task
    assert any(expected.values())


def test_no_goal_in_the_traces(world, vf_eval_run):
    _, text, _ = vf_eval_run
    for key in PRIVATE_KEYS:
        assert key not in text
    for task_id in world.catalog.split(SPLIT)[:ROLLOUTS]:
        goal = world.catalog.goal(task_id)
        if goal.get("user_persona") and goal["instruction_text"] != goal["instruction_simple"]:
            assert json.dumps(goal["instruction_text"], ensure_ascii=False)[1:-1] not in text


# --- dialogue mode (issue 16) -------------------------------------------------------------------------------

DIALOGUE_ROLLOUTS = 4


def in_process_dialogue(world, task_ids):
    from shopsimrl.agent import RuntimeConfig

    runtime = AgentRuntime(BuiltinPolicyModel.named("dialogue-heuristic", world), InProcessEnvironment(world),
                           config=RuntimeConfig(max_steps=40, interaction_mode="multi_turn", shopper="rule"))
    return {t: asyncio.run(runtime.run(EpisodeJob(task_id=t))) for t in task_ids}


def test_dialogue_taskset_carries_the_shoppers_opening(world, prepared_dir):
    config = ShopSimTasksetConfig(id="shopsim-env", data=str(prepared_dir), split=SPLIT, shopper="rule")
    tasks = list(ShopSimTaskset(config))
    records = in_process_dialogue(world, [t.data.task_id for t in tasks[:4]])
    for task in tasks[:4]:
        conversation = records[task.data.task_id]["conversation"]
        assert task.data.shopper == "rule" and task.key.endswith("-rule")
        assert task.data.system_prompt == conversation[0]["content"]
        assert task.data.prompt == conversation[1]["content"]  # the opening, never the instruction
        assert world.catalog.goal(task.data.task_id)["instruction_text"] not in task.data.prompt


@pytest.fixture(scope="module")
def vf_eval_dialogue(world, prepared_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("vf-eval-dialogue")
    with serve(create_policy_app(world, policy="dialogue-heuristic")) as url:
        command = [
            str(Path(sys.executable).parent / "vf-eval"), "shopsim-env",
            "--env.taskset.data", str(prepared_dir), "--env.taskset.split", SPLIT,
            "--env.taskset.shopper", "rule", "--env.agent.max-turns", "40",
            "-m", "shopsim-dialogue-heuristic", "--client.base-url", f"{url}/v1",
            "--client.api-key-var", "SHOPSIM_KEY", "-n", str(DIALOGUE_ROLLOUTS), "--no-push", "--no-rich",
            "-o", str(out),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "SHOPSIM_KEY": "EMPTY"},
                              timeout=600, cwd=out)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    (traces,) = out.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    return episodes, traces.read_text(), log


def test_vf_eval_dialogue_asks_the_shopper_and_matches_in_process(world, vf_eval_dialogue):
    episodes, text, log = vf_eval_dialogue
    assert len(episodes) == DIALOGUE_ROLLOUTS, log[-3000:]
    through = {}
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        assert not trace["errors"] and trace["stop_condition"] == "episode_over"
        assert sorted(tool["name"] for tool in trace["tools"]) == ["ask_user", "click", "search"]
        through[trace["task"]["data"]["task_id"]] = trace["rewards"]["r_strict"]["score"]
    records = in_process_dialogue(world, sorted(through))
    assert through == {t: r["final"]["reward"] for t, r in records.items()}
    asked = sum(1 for r in records.values() for s in r["steps"] if s["action"].startswith("ask_user["))
    assert asked and text.count("顾客回复：") >= asked  # every question reached the shopper through the MCP tool
    for task_id in through:
        assert json.dumps(world.catalog.goal(task_id)["instruction_text"], ensure_ascii=False)[1:-1] not in text


# --- the documented command (issue 45 item 5) ----------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"


def documented_vf_eval() -> list[str]:
    """The ``vf-eval`` command of docs/integrations.md, as a reader copies it (continuation lines joined)."""
    text = DOCS.read_text("utf-8")
    block = text[text.index("OPENAI_API_KEY=EMPTY .venv-verifiers/bin/vf-eval"):]
    block = block[:block.index("```")].replace("\\\n", " ")
    return block.split()[1:]  # without the environment assignment


def test_the_documented_vf_eval_command_scores_every_rollout(world, prepared_dir, tmp_path):
    """As written (its -c included), at a faithful smaller size: the fixture's 15 tasks x 2 rollouts, not 100 x 1."""
    args = documented_vf_eval()
    assert args[args.index("-c") + 1] == "8" and "--no-push" in args
    tasks = list(world.catalog.split("all"))
    replace = {"--env.taskset.data": str(prepared_dir), "--env.taskset.split": "all", "-n": str(len(tasks))}
    with serve(create_policy_app(world, policy="heuristic")) as url:
        replace["--client.base-url"] = f"{url}/v1"
        command = [str(Path(sys.executable).parent / "vf-eval")]
        for i, arg in enumerate(args[1:], start=1):
            command.append(replace.get(args[i - 1], arg) if i > 1 else arg)
        command += ["-r", "2", "--no-rich", "-o", str(tmp_path)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path,
                              env={**os.environ, "OPENAI_API_KEY": "EMPTY"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    (traces,) = tmp_path.glob("*/traces.jsonl")
    rollouts = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    assert len(rollouts) == 2 * len(tasks)
    assert all(r["ok"] and not r["errors"] for r in rollouts), [r["errors"] for r in rollouts if r["errors"]]
    scores = {}
    for rollout in rollouts:
        (trace,) = rollout["traces"]
        scores.setdefault(trace["task"]["data"]["task_id"], set()).add(trace["rewards"]["r_strict"]["score"])
    expected = {t: r["final"]["reward"] for t, r in in_process(world, tasks).items()}
    assert scores == {t: {v} for t, v in expected.items()} and any(expected.values())


def test_toolset_holds_the_episode_shells_rules(world, prepared_dir):
    """Every task, the loop's own episode replayed through the tool server (its state set as verifiers sets it
    for a call): the same pages, step count, end and public reward; after the end, the shell's one message."""
    from shopsim_env.toolset import ShopSimState, ShopSimToolset, ShopSimToolsetConfig
    from verifiers.v1.mcp import server as vf_server

    from shopsimrl.agent.episode import EpisodeRequest
    from shopsimrl.agent.episode_shell import EPISODE_OVER, public_reward
    from shopsimrl.agent.play import play
    from shopsimrl.agent.policies import make_policy

    engine = world.new_env(shoppers=shopper_registry())
    for shopper, name in ((None, "heuristic"), (None, "random"), ("rule", "dialogue-heuristic")):
        toolset = ShopSimToolset(ShopSimToolsetConfig(data=str(prepared_dir), shopper=shopper))
        asyncio.run(toolset.setup())
        policy = make_policy(name, world)
        for task_id in world.catalog.split(SPLIT):
            episode, hooks = play(engine, policy, EpisodeRequest(task_id, shopper=shopper), seed=task_id)
            state = ShopSimState(session=f"{name}-{task_id}", task_id=task_id, shopper=shopper)
            token = vf_server._call_state.set(state)
            try:
                for turn in hooks.history:
                    tool, _, value = turn.action[:-1].partition("[")
                    assert asyncio.run(getattr(toolset, tool)(value)) == turn.observation
                assert state.done and state.steps == len(hooks.history)
                assert state.termination_reason == episode.final["termination_reason"]
                assert state.reward == episode.final["reward"]
                assert state.reward_detail == public_reward(episode.final["reward_detail"])
                assert asyncio.run(toolset.search("x")) == EPISODE_OVER
                assert state.steps == len(hooks.history) and f"{name}-{task_id}" not in toolset.sessions
            finally:
                vf_server._call_state.reset(token)
    engine.close()
