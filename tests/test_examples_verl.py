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
