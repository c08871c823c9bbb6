"""examples/slime on CPU as far as it goes: the task builder, the ``--custom-config-path`` YAML applied the way
slime applies it, the full command's shop wiring, and the first rollout step (two GRPO groups of 8) through the
slime stand-in (tests/slime_standin.py, slime at commit 624b824a898ab0ec1fcb4d373004c7f3852bf515) against a
real ``shopsimrl serve`` app over HTTP.

Checked with the project's character-level ChatML tokenizer (``tests/toy.py``'s ``ToyChatTokenizer``, tools
in the system block) and the oracle/heuristic policies as the sampler, standing in for the recipe's
Qwen3-4B-Instruct-2507 behind SGLang; Megatron, SGLang and the optimizer step do not run here.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import slime_standin as slime
from live_server import serve
from shopsimrl.agent.policies import make_policy
from shopsimrl.env import ShopWorld
from shopsimrl.server.app import create_app
from shopsimrl.train import slime as adapter
from toy import PolicyGenerate, ToyChatTokenizer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "slime"
# slime flags the recipe uses, each found in slime/utils/arguments.py at commit 624b824 (Megatron's own flags
# and SGLang's `--sglang-*` pass-throughs are not listed)
SLIME_FLAGS = {
    "--hf-checkpoint", "--ref-load", "--actor-num-nodes", "--actor-num-gpus-per-node", "--colocate",
    "--prompt-data", "--input-key", "--metadata-key", "--rollout-shuffle", "--eval-prompt-data", "--eval-interval",
    "--n-samples-per-eval-prompt", "--custom-config-path", "--custom-generate-function-path",
    "--dynamic-sampling-filter-path", "--custom-reward-post-process-path", "--reward-key", "--advantage-estimator",
    "--n-samples-per-prompt", "--over-sampling-batch-size", "--rollout-batch-size", "--global-batch-size",
    "--num-rollout", "--rollout-temperature", "--rollout-top-p", "--rollout-top-k", "--rollout-max-response-len",
    "--rollout-max-context-len", "--eps-clip", "--eps-clip-high", "--entropy-coef", "--use-dynamic-batch-size",
    "--max-tokens-per-gpu", "--rollout-num-gpus-per-engine", "--custom-rollout-log-function-path",
}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


@pytest.fixture(scope="module")
def tasks(prepared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shop_tasks")
    done = subprocess.run([sys.executable, str(EXAMPLE / "build_tasks.py"), "--data", str(prepared_dir),
                           "--out", str(out)], capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def _command(tasks: Path) -> dict[str, list[str]]:
    done = subprocess.run(["bash", str(EXAMPLE / "run_grpo.sh")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRY_RUN": "1", "TASKS": str(tasks), "SLIME_DIR": "/nonexistent"})
    assert done.returncode == 0, done.stderr
    argv = done.stdout.splitlines()
    assert argv[:2] == ["python3", "/nonexistent/train.py"]
    flags: dict[str, list[str]] = {}
    current = None
    for arg in argv[2:]:
        if arg.startswith("--"):
            current = arg
            flags[current] = []
        else:
            assert current is not None, arg
            flags[current].append(arg)
    return flags


def _load(path: str) -> Any:
    """slime's ``load_function``: ``module.attr``."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_task_builder_writes_slime_task_lines(tasks: Path, prepared_dir: Path) -> None:
    for split in ("train", "val"):
        lines = [json.loads(x) for x in (tasks / f"{split}.jsonl").read_text("utf-8").splitlines()]
        assert lines
        for line in lines:
            meta = line["metadata"]
            assert line["prompt"] == str(meta["task_id"]) and meta["split"] == split
            assert meta["schema_version"] == adapter.TASKS_SCHEMA


def test_the_command_wires_the_adapter_with_the_reference_settings(tasks: Path) -> None:
    flags = _command(tasks)
    slime_flags = {f for f in flags if not f.startswith("--sglang-")}
    known_megatron = {"--load", "--save", "--save-interval", "--optimizer", "--lr", "--lr-decay-style",
                      "--adam-beta1", "--adam-beta2", "--weight-decay", "--tensor-model-parallel-size",
                      "--sequence-parallel", "--recompute-granularity", "--recompute-method",
                      "--recompute-num-layers", "--attention-dropout", "--hidden-dropout",
                      "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32"}
    assert slime_flags - known_megatron <= SLIME_FLAGS
    for flag, attr in (("--custom-generate-function-path", "generate"),
                       ("--dynamic-sampling-filter-path", "fully_scored_group_filter"),
                       ("--custom-reward-post-process-path", "normalize_grpo_by_prompt_and_rollout"),
                       ("--custom-rollout-log-function-path", "log_rollout_health")):
        assert _load(flags[flag][0]) is getattr(adapter, attr)
    assert flags["--rollout-top-p"] == ["1.0"] and flags["--rollout-top-k"] == ["-1"]  # exact log-prob replay
    assert flags["--rollout-temperature"] == ["0.6"] and flags["--reward-key"] == ["reward"]
    assert flags["--n-samples-per-prompt"] == ["8"] and flags["--over-sampling-batch-size"] == ["32"]
    assert flags["--rollout-batch-size"] == ["16"] and flags["--global-batch-size"] == ["64"]
    assert flags["--rollout-max-response-len"] == ["4096"] and flags["--rollout-max-context-len"] == ["24576"]
    assert flags["--num-rollout"] == ["80"] and flags["--save-interval"] == ["20"]  # the reference's 80 steps
    assert flags["--load"] == flags["--save"]  # a rerun resumes from the last checkpoint
    assert (flags["--eps-clip"], flags["--eps-clip-high"], flags["--lr"]) == (["0.2"], ["0.28"], ["1e-6"])
    assert "--use-kl-loss" not in flags and "--apply-chat-template" not in flags
    config = yaml.safe_load(Path(flags["--custom-config-path"][0]).read_text("utf-8"))
    assert set(config) == {"shopsim_env_url", "shopsim_group_concurrency", "shopsim_max_steps"}


def test_first_rollout_step_through_the_standin_against_a_served_shop(tasks, prepared_dir, monkeypatch) -> None:
    slime.install(monkeypatch)
    flags = _command(tasks)
    world = ShopWorld.from_data_dir(prepared_dir)
    tokenizer = ToyChatTokenizer()
    policies = iter(["oracle", "heuristic"] * 64)
    adapter.configure(tokenizer=lambda args: tokenizer,
                      backend=lambda args, params: PolicyGenerate(tokenizer, make_policy(next(policies), world)))
    try:
        with serve(create_app(world, slots=16)) as url:
            args = SimpleNamespace(partial_rollout=False, group_rm=False, rollout_max_context_len=24576,
                                   reward_key="reward", grpo_std_normalization=True,
                                   n_samples_per_prompt=int(flags["--n-samples-per-prompt"][0]))
            # slime's --custom-config-path: every YAML key becomes an attribute of args
            for key, value in yaml.safe_load(Path(flags["--custom-config-path"][0]).read_text("utf-8")).items():
                setattr(args, key, value)
            args.shopsim_env_url = url  # the recipe's serve address, here the test's server
            generate = _load(flags["--custom-generate-function-path"][0])
            lines = [json.loads(x) for x in (tasks / "train.jsonl").read_text("utf-8").splitlines()][:2]
            params = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "max_new_tokens": 4096}
            groups = []
            for g, line in enumerate(lines):  # slime's data source: one Sample per prompt, n copies per group
                group = [slime.Sample(group_index=g, index=g * 8 + i, prompt=line["prompt"],
                                      metadata=dict(line["metadata"])) for i in range(args.n_samples_per_prompt)]
                groups.append([asyncio.run(slime.generate_and_rm(args, s, dict(params), generate)) for s in group])
            data, dropped = slime.select_groups(args, groups, _load(flags["--dynamic-sampling-filter-path"][0]), 2)
            assert len(data) == 2 and dropped == []  # zero-spread groups would be kept: the batch is short
            flat = slime.flatten_rollout(data)
            train = slime.convert_samples_to_train_data(args, flat,
                                                        _load(flags["--custom-reward-post-process-path"][0]))
            # slime's rollout logging with the recipe's log function: the health joins the step's metrics
            args.custom_rollout_log_function_path = flags["--custom-rollout-log-function-path"][0]
            slime.LOGGED.clear()
            slime.log_rollout_data(0, args, flat, {"rollout/extra": 1.0}, 1.0)
            slime.log_rollout_data(1, args, flat, None, 1.0)  # a rollout function that returned no metrics
    finally:
        adapter.configure(tokenizer=None, backend=None, environment=None)
        adapter._ENVIRONMENTS.clear()
    assert len(set(train["rollout_ids"])) == 16
    first, *second = slime.LOGGED
    assert first["shop/protocol_error_alarm"] == 0.0 and first["rollout/extra"] == 1.0 and first["rollout/step"] == 0
    # no metrics dict from the rollout function: the health is logged on its own at the same step, then slime's own
    assert [m["rollout/step"] for m in second] == [1, 1] and "shop/protocol_error_rate" in second[0]
    for group in data:  # state keys per sample: every sibling starts on the same page
        firsts = {s.metadata["shopsim_state_keys"][0] for s in slime.flatten_rollout([group])}
        assert len(firsts) == 1
    assert all(len(m) == n for m, n in zip(train["loss_masks"], train["response_lengths"], strict=True))
    assert all(sum(m) > 0 for m in train["loss_masks"])
