"""examples/trl: the 8-GPU launch checked by TRL's and accelerate's own parsers, and the recipe's checkpoints and
resume through TRL's own trainer (a tiny CPU run: ``--cpu-check``)."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("accelerate")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("trl_example_recipes", EXAMPLE / "train_grpo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(**env: str) -> tuple[dict[str, str], list[str], dict[str, str], list[str]]:
    done = subprocess.run(["bash", str(EXAMPLE / "launch_8gpu.sh")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRY_RUN": "1", **env})
    assert done.returncode == 0, done.stderr
    serve_line, train_line = done.stdout.splitlines()

    def split(line: str) -> tuple[dict[str, str], list[str]]:
        words = shlex.split(line)
        env_vars = dict(w.split("=", 1) for w in words if "=" in w and w.split("=", 1)[0].isupper())
        return env_vars, [w for w in words if w.split("=", 1)[0] not in env_vars]

    return (*split(serve_line), *split(train_line))  # type: ignore[return-value]


def _on_cpu(config: dict[str, Any]) -> dict[str, Any]:
    """TrainingArguments refuses bf16 without a GPU; on this CPU machine only ``use_cpu`` is added."""
    return {**config, "use_cpu": True}


def test_the_8gpu_launch_parses_with_trls_and_accelerates_own_parsers() -> None:
    """vLLM on GPUs 0-3 (TRL's ``vllm-serve`` parser and the vLLM command it builds), training on GPUs 4-7
    (accelerate's ``launch`` parser and config validation, ZeRO-3 over 4 processes), and the training script's
    arguments composed into TRL's ``GRPOConfig`` by TRL's own parser: 128 completions per generation, optimizer
    steps of 64, 160 optimizer steps = the reference's 80 rollout steps."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from trl import GRPOConfig, TrlParser
    from trl.scripts import vllm_serve

    serve_env, serve, train_env, train = _launch()
    assert serve_env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and train_env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert serve[:2] == ["trl", "vllm-serve"] and train[:2] == ["accelerate", "launch"]
    server, extra = vllm_serve.make_parser().parse_args_and_config(args=serve[2:], return_remaining_strings=True)
    assert extra == [] and server.data_parallel_size == 4 and server.max_model_len == 24576
    command = vllm_serve.build_command(server, extra)
    assert "--weight-transfer-config" in command  # the endpoints TRL's weight sync talks to
    launch = launch_command_parser().parse_args(train[2:])
    launch, _, _ = _validate_launch_command(launch)
    assert launch.num_processes == 4 and launch.use_deepspeed and launch.zero_stage == 3
    assert launch.mixed_precision == "bf16" and Path(launch.training_script) == EXAMPLE / "train_grpo.py"
    module = _example()
    args = module.parse_args(launch.training_script_args)
    assert args.vllm_server == "http://127.0.0.1:8000" and args.num_generations == 8
    (config,) = TrlParser((GRPOConfig,)).parse_dict(_on_cpu(module.grpo_config(args)))
    assert config.use_vllm and config.vllm_mode == "server" and config.vllm_server_base_url == args.vllm_server
    assert config.generation_batch_size == 128 and 128 % config.num_generations == 0  # 16 tasks x 8
    per_optimizer_step = config.per_device_train_batch_size * launch.num_processes * config.gradient_accumulation_steps
    assert per_optimizer_step == 64 and config.max_steps * per_optimizer_step // 128 == 80  # rollout steps
    assert config.save_steps * per_optimizer_step // 128 == 20  # a checkpoint every 20 rollout steps
    resumed = _launch(RESUME="1")[3]
    assert resumed[-1] == "--resume" and module.parse_args(resumed[resumed.index("--model"):]).resume


def test_the_single_process_defaults_keep_the_reference_batch() -> None:
    from trl import GRPOConfig, TrlParser

    module = _example()
    args = module.parse_args(["--model", "m", "--vllm-server", "http://127.0.0.1:8000"])
    args.max_steps = args.max_steps or 160
    (config,) = TrlParser((GRPOConfig,)).parse_dict(_on_cpu(module.grpo_config(args)))
    per_optimizer_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    assert config.generation_batch_size == 128 and per_optimizer_step == 64 and config.max_steps == 160
    assert config.save_strategy == "steps" and config.save_steps == 40


@pytest.mark.slow
def test_the_trl_recipe_checkpoints_and_resumes(prepared_dir: Path, tmp_path: Path) -> None:
    """A tiny run saves a checkpoint every step; ``--resume`` continues from the last one: TRL restores the step
    counter and optimizer and runs only the steps left."""
    module = _example()
    out = tmp_path / "o"
    base = ["--cpu-check", "--data", str(prepared_dir), "--output-dir", str(out), "--save-steps", "1"]
    first = module.run(module.parse_args([*base, "--max-steps", "1"]))
    assert first.state.global_step == 1 and (out / "checkpoint-1" / "trainer_state.json").exists()
    second = module.run(module.parse_args([*base, "--max-steps", "2", "--resume"]))
    assert second.state.global_step == 2 and (out / "checkpoint-2").exists()
    trained = [h["step"] for h in second.state.log_history if "loss" in h]
    assert trained == [1, 2]  # step 1 comes from the checkpoint's history, step 2 was trained now
