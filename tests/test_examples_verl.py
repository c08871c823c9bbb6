"""examples/verl on CPU as far as it goes: the task builder, the agent-loop YAML and the full command parse with
verl's own code, and the first rollout step runs through verl's ``AgentLoopWorker`` on the built parquet file.

Runs in the verl environment (``.venv-verl``; skipped elsewhere). The GPU parts (vLLM, FSDP, the optimizer
step) do not run here. Checked with a tiny local Llama config and a character-level tokenizer with a
tools-aware ChatML template (``shopsimrl.testing.tiny_hf``), standing in for the recipe's Qwen3-4B-Instruct-2507.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

verl = pytest.importorskip("verl", reason="verl runs in its own environment (.venv-verl, see the Makefile)")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402

import verl_support as support  # noqa: E402
from verl_support import verl_config, worker_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "verl"


@pytest.fixture(scope="module")
def scripts(prepared_dir: Path) -> dict[int, dict[str, Any]]:
    return support.oracle_scripts(prepared_dir)


@pytest.fixture(scope="module")
def model_dir(prepared_dir: Path, scripts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return support.tiny_model_dir(prepared_dir, scripts, tmp_path_factory.mktemp("verl-model"))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


@pytest.fixture(scope="module")
def tasks(prepared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shop_tasks")
    done = subprocess.run([sys.executable, str(EXAMPLE / "build_tasks.py"), "--data", str(prepared_dir),
                           "--out", str(out)], capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def _command(tasks: Path, model: Path) -> list[str]:
    done = subprocess.run(["bash", str(EXAMPLE / "run_grpo.sh")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRY_RUN": "1", "MODEL_PATH": str(model), "TASKS": str(tasks)})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_task_builder_writes_rows_verls_dataset_reads(tasks: Path, model_dir: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(tasks / "train.parquet").to_pylist()
    assert table and all(r["agent_name"] == "shopsim" for r in table)
    assert all(isinstance(r["extra_info"]["task_id"], int) and r["prompt"][0]["role"] == "user" for r in table)
    assert len({r["extra_info"]["task_id"] for r in table}) == len(table)
    assert pq.read_table(tasks / "val.parquet").num_rows > 0
    from transformers import AutoTokenizer

    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 8192, "return_raw_chat": True,
                               "filter_overlong_prompts": False})
    dataset = RLHFDataset(str(tasks / "train.parquet"), AutoTokenizer.from_pretrained(model_dir), config)
    row = dataset[0]
    assert row["agent_name"] == "shopsim" and row["extra_info"]["task_id"] == table[0]["extra_info"]["task_id"]


def test_the_full_command_composes_with_verls_config_and_keeps_the_reference_settings(tasks, model_dir) -> None:
    command = _command(tasks, model_dir)
    assert command[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    config = verl_config(command[3:])  # Hydra refuses unknown keys: every override names a real setting
    rollout, actor = config.actor_rollout_ref.rollout, config.actor_rollout_ref.actor
    assert rollout.name == "vllm" and rollout.mode == "async" and rollout.n == 8
    assert (rollout.temperature, rollout.top_p, rollout.top_k) == (0.6, 1.0, -1)
    assert rollout.prompt_length + rollout.response_length == 24576  # the reference context
    assert config.data.max_prompt_length == rollout.prompt_length and rollout.calculate_log_probs
    assert config.algorithm.adv_estimator == "shopsim_grpo" and not actor.use_kl_loss
    hook = config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook
    assert hook == "shopsimrl.train.verl_grpo.register"
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.optim.lr) == (0.2, 0.28, 1e-6)
    assert list(actor.optim.betas) == [0.9, 0.98] and actor.optim.weight_decay == 0.1
    assert config.data.train_batch_size * rollout.n == 128 and actor.ppo_mini_batch_size * rollout.n == 64
    loops = OmegaConf.load(rollout.agent.agent_loop_config_path)
    assert loops[0].name == "shopsim" and loops[0]._target_ == "shopsimrl.train.verl.ShopAgentLoop"
    assert loops[0].max_tokens_per_turn == 4096
    trainer = config.trainer
    assert trainer.use_v1 is False  # verl's default V1 trainer needs transfer_queue (see the test below)
    assert trainer.total_training_steps == 80 and trainer.save_freq == 20 and trainer.resume_mode == "auto"
    assert trainer.test_freq == 20
    assert rollout.agent.agent_loop_manager_class == "shopsimrl.train.verl_manager.ShopAgentLoopManager"


def test_first_rollout_step_on_the_built_tasks(tasks, model_dir, prepared_dir, scripts, monkeypatch) -> None:
    """verl's dataset → collate → ``generate_sequences`` with the recipe's own config and agent-loop YAML."""
    monkeypatch.setenv("SHOPSIM_DATA", str(prepared_dir))
    config = verl_config(_command(tasks, model_dir)[3:])
    worker = worker_for(config, scripts)
    dataset = RLHFDataset(str(tasks / "train.parquet"), worker.tokenizer, config.data)
    wanted = [i for i in range(len(dataset)) if dataset[i]["extra_info"]["task_id"] in scripts]
    assert wanted, "the fixture's train split must contain a scripted task"
    batch = next(iter(DataLoader([dataset[i] for i in wanted], batch_size=len(wanted), collate_fn=collate_fn)))
    proto = DataProto.from_single_dict(batch, meta_info={"global_steps": 1, "validate": False})
    proto = proto.repeat(repeat_times=2, interleave=True)  # a (small) GRPO group per task
    out = asyncio.run(worker.generate_sequences(proto))
    assert out.batch["responses"].shape == (2 * len(wanted), 16384)
    assert set(out.non_tensor_batch["shopsim_status"]) == {"completed"}
    assert out.batch["response_mask"].sum(dim=1).min().item() > 0
    assert {c["sampling_params"]["max_tokens"] for c in worker.llm_client.calls} <= {4096}
    assert all(c["sampling_params"]["temperature"] == 0.6 for c in worker.llm_client.calls)


def test_token_budgets_hold_the_longest_sequence_in_verls_own_micro_batching(tasks, model_dir) -> None:
    """Every dynamic-batch budget of the recipe (actor update, reference and rollout log-probs) is checked by
    verl's own ``rearrange_micro_batches`` on a padded batch of the recipe's width holding a sequence of
    the recipe's longest sequence (24,576 tokens); verl's default (16384) fails the same check."""
    import torch
    from verl.utils.seqlen_balancing import rearrange_micro_batches

    config = verl_config(_command(tasks, model_dir)[3:])
    ref = config.actor_rollout_ref
    width = longest = ref.rollout.prompt_length + ref.rollout.response_length
    mask = torch.zeros(4, width, dtype=torch.int64)
    mask[0, :longest] = 1
    mask[1:, :1000] = 1
    batch = {"input_ids": torch.zeros(4, width, dtype=torch.int64), "attention_mask": mask}
    from tensordict import TensorDict

    batch = TensorDict(batch, batch_size=[4])
    budgets = {"actor": ref.actor.ppo_max_token_len_per_gpu, "ref": ref.ref.log_prob_max_token_len_per_gpu,
               "rollout": ref.rollout.log_prob_max_token_len_per_gpu}
    assert ref.actor.use_dynamic_bsz
    for name, budget in budgets.items():
        micro, _ = rearrange_micro_batches(batch, max_token_len=int(budget))
        assert sum(len(m) for m in micro) == 4, name
    with pytest.raises(AssertionError, match="max_token_len"):
        rearrange_micro_batches(batch, max_token_len=16384)


def _scripted_tasks(data_dir: Path, scripts, out: Path) -> Path:
    """Task parquet files in ``build_tasks.py``'s row format, for the tasks the scripted server can answer (the
    model's prompt comes from the environment's reset; the row carries the task id)."""
    from shopsimrl.train.verl import task_rows, write_parquet

    (template, *_) = task_rows(data_dir, "train", 1)
    rows = [{**template, "extra_info": {**template["extra_info"], "task_id": t, "index": t}} for t in sorted(scripts)]
    write_parquet(rows, out / "train.parquet")
    write_parquet(rows, out / "val.parquet")
    return out


# The recipe's command with only what a CPU run must change: a batch the scripted tasks fill, no validation
# (the scripted server answers train tasks only), and one agent-loop worker; everything else as written.
CPU_RUN = ["data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2", "trainer.test_freq=-1",
           "trainer.val_before_train=false", "actor_rollout_ref.rollout.agent.num_workers=1",
           "trainer.n_gpus_per_node=1"]


def _recipe_argv(tasks: Path, model: Path, ckpt: Path, *extra: str) -> list[str]:
    done = subprocess.run(["bash", str(EXAMPLE / "run_grpo.sh"), *CPU_RUN, f"hydra.run.dir={ckpt.parent / 'hydra'}",
                           *extra], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRY_RUN": "1", "MODEL_PATH": str(model), "TASKS": str(tasks),
                               "CKPT_DIR": str(ckpt)})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[3:]


def test_main_ppo_runs_the_recipe_to_its_first_advantages(tasks, model_dir, prepared_dir, scripts, tmp_path,
                                                          monkeypatch) -> None:
    """verl's own ``main_ppo`` entry point with the recipe's command: the legacy ``TaskRunner`` (the recipe pins
    ``trainer.use_v1=false``), one training step through ``RayPPOTrainer.fit``: 2 tasks x 8 rollouts from verl's
    ``AgentLoopWorker``, the ``shopsim_grpo`` advantages verl hands to the actor update, the protocol-error
    alarm in the step's training metrics, and the state keys of every row (see verl_trainer_support)."""
    from verl.trainer.main_ppo_v0 import TaskRunner

    from shopsimrl.train.step_keys import split_keys, step_groups
    from verl_trainer_support import run_main_ppo

    monkeypatch.setenv("SHOPSIM_DATA", str(prepared_dir))
    monkeypatch.chdir(tmp_path)
    small = _scripted_tasks(prepared_dir, scripts, tmp_path / "tasks")
    ckpt = tmp_path / "ckpt"
    # one sibling per task rambles into a length cut-off (scored, reward 0) or has its engine abort (unscored)
    modes = {t: ("ramble" if t % 2 else "abort") for t in scripts}
    run = run_main_ppo(_recipe_argv(small, model_dir, ckpt, "trainer.total_training_steps=1"), scripts, monkeypatch,
                       sibling_mode=modes)
    assert run.runner_class is TaskRunner and run.config.trainer.use_v1 is False
    (batch,) = run.actor.trained  # the one actor update of the one step
    assert batch.batch_size[0] == 2 * 8
    adv, mask = batch["advantages"], batch["response_mask"]
    rewards = batch["token_level_rewards"].sum(-1)
    uids = list(batch["uid"])
    tasks = [int(e["task_id"]) for e in batch["extra_info"]]
    assert len(set(uids)) == 2
    for uid in set(uids):
        rows = [i for i, u in enumerate(uids) if u == uid]
        (task,) = {tasks[i] for i in rows}
        assert len(rows) == 8
        first = adv[rows, 0]
        if modes[task] == "abort":  # an unscored sibling drops the group (stock grpo would not)
            assert sum(mask[i].sum().item() == 0 for i in rows) == 1 and adv[rows].abs().sum().item() == 0
        else:  # 7 completed, 1 cut off with reward 0: verl's GRPO numbers on the first response token
            group = rewards[rows]
            assert sorted(group.tolist()).count(0.0) == 1
            expected = (group - group.mean()) / (group.std() + 1e-6)
            assert torch.allclose(first, expected, atol=1e-4)
    ((step, metrics),) = run.logged
    assert step == 1 and metrics["training/global_step"] == 1
    assert metrics["timing_s/shop/protocol_error_rate"] == 0.0
    assert metrics["timing_s/shop/protocol_error_alarm"] == 0.0
    assert metrics["critic/score/mean"] == pytest.approx(float(rewards.mean()))
    keys = [split_keys(k) for k in batch["shopsim_state_keys"]]
    groups = step_groups(uids, keys)
    status = list(batch["shopsim_status"])
    for uid in set(uids):  # the 7 completed siblings replay one script: each of their pages is one step group
        rows = [i for i, u in enumerate(uids) if u == uid]
        done = [i for i in rows if status[i] == "completed"]
        assert len(done) == 7 and len({tuple(keys[i]) for i in done}) == 1 and keys[done[0]]
        for turn, key in enumerate(keys[done[0]]):
            assert {(i, turn) for i in done} <= set(groups[(uid, key)])
        for i in rows:
            if status[i] == "truncated":  # the rambler sampled once, on the same first page
                assert keys[i] == keys[done[0]][:1] and (i, 0) in groups[(uid, keys[i][0])]
    # checkpoints: the recipe's save_freq saves at the last step
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "1"
    assert (ckpt / "global_step_1" / "data.pt").exists()


def test_verls_default_v1_trainer_stops_on_transfer_queue(tasks, model_dir, prepared_dir, scripts, tmp_path,
                                                           monkeypatch) -> None:
    """Why the recipe pins ``trainer.use_v1=false``: verl 0.9.1's default picks ``TaskRunnerV1``, whose ``run``
    imports ``transfer_queue``, which verl does not install (the crash before any GPU work)."""
    from verl.trainer.main_ppo import TaskRunnerV1

    from verl_trainer_support import run_main_ppo

    monkeypatch.setenv("SHOPSIM_DATA", str(prepared_dir))
    monkeypatch.chdir(tmp_path)
    small = _scripted_tasks(prepared_dir, scripts, tmp_path / "tasks")
    seen: list[Any] = []
    real = TaskRunnerV1.__ray_actor_class__.run

    def run(self: Any, config: Any) -> None:
        seen.append(type(self))
        real(self, config)

    monkeypatch.setattr(TaskRunnerV1.__ray_actor_class__, "run", run)
    with pytest.raises(ModuleNotFoundError, match="transfer_queue"):
        run_main_ppo(_recipe_argv(small, model_dir, tmp_path / "ckpt", "trainer.use_v1=true"), scripts, monkeypatch)
    assert seen == [TaskRunnerV1.__ray_actor_class__] and verl_config([]).trainer.use_v1 is True


def test_the_recipe_checkpoints_and_resumes_through_verls_own_trainer(tasks, model_dir, prepared_dir, scripts,
                                                                      tmp_path, monkeypatch) -> None:
    """A tiny run of the recipe saves at its interval (here every step); rerunning the same command resumes
    from the last checkpoint (``trainer.resume_mode=auto``): verl's ``_load_checkpoint`` restores the step
    counter, the actor and the dataloader position, so the resumed run trains step 2 on the other tasks."""
    from verl_trainer_support import run_main_ppo

    monkeypatch.setenv("SHOPSIM_DATA", str(prepared_dir))
    monkeypatch.chdir(tmp_path)
    small = _scripted_tasks(prepared_dir, scripts, tmp_path / "tasks")
    ckpt = tmp_path / "ckpt"
    first = run_main_ppo(_recipe_argv(small, model_dir, ckpt, "trainer.total_training_steps=1",
                                      "trainer.save_freq=1"), scripts, monkeypatch)
    assert [s for s, _ in first.logged] == [1] and (ckpt / "latest_checkpointed_iteration.txt").read_text() == "1"
    seen = {int(e["task_id"]) for e in first.actor.trained[0]["extra_info"]}
    second = run_main_ppo(_recipe_argv(small, model_dir, ckpt, "trainer.total_training_steps=2",
                                       "trainer.save_freq=1"), scripts, monkeypatch)
    assert second.actor.loaded == [str(ckpt / "global_step_1" / "actor")]
    assert [s for s, _ in second.logged] == [2]  # step 1 is not run again
    assert second.actor.updates == 2  # the restored actor state, plus this step's update
    resumed = {int(e["task_id"]) for e in second.actor.trained[0]["extra_info"]}
    assert resumed == set(scripts) - seen  # the dataloader went on where it stopped
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    fresh = run_main_ppo(_recipe_argv(small, model_dir, tmp_path / "other", "trainer.total_training_steps=1"),
                         scripts, monkeypatch)
    assert fresh.actor.loaded == [] and [s for s, _ in fresh.logged] == [1]


def test_the_protocol_error_alarm_reaches_verls_training_metrics(tasks, model_dir, prepared_dir, scripts, tmp_path,
                                                                 monkeypatch) -> None:
    """A model that never calls a tool: every turn is a protocol error, and the step's training metrics (what
    ``RayPPOTrainer.fit`` hands its ``Tracking`` logger) carry the rate 1.0 and the alarm 1.0."""
    from verl_trainer_support import run_main_ppo

    monkeypatch.setenv("SHOPSIM_DATA", str(prepared_dir))
    monkeypatch.chdir(tmp_path)
    small = _scripted_tasks(prepared_dir, scripts, tmp_path / "tasks")
    run = run_main_ppo(_recipe_argv(small, model_dir, tmp_path / "ckpt", "trainer.total_training_steps=1"), scripts,
                       monkeypatch, mode=dict.fromkeys(scripts, "babble"))
    ((_, metrics),) = run.logged
    assert metrics["timing_s/shop/protocol_error_rate"] == 1.0
    assert metrics["timing_s/shop/protocol_error_alarm"] == 1.0
