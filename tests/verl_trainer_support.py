"""verl's own ``main_ppo`` entry point, in this process, on CPU: stand-ins for the GPU parts only.

What runs as verl wrote it: ``verl.trainer.main_ppo.main`` (Hydra composes the recipe's command line, verl's
``validate_config``, the choice of task runner from ``trainer.use_v1``), ``TaskRunner.run`` (worker roles,
``HFModelConfig`` and its tokenizer, ``create_rl_dataset`` on the recipe's parquet, the resource-pool spec,
``RayPPOTrainer``) and ``RayPPOTrainer.fit`` (dataloader, uids, ``repeat``, the agent-loop manager's
``generate_sequences`` with verl's ``AgentLoopWorker`` and the recipe's manager class, ``extract_reward``,
``_compute_old_log_prob``'s padding round trip, ``compute_advantage`` with the recipe's estimator,
``_update_actor``'s batch, ``_save_checkpoint`` / ``_load_checkpoint`` (dataloader state, the
``latest_checkpointed_iteration.txt`` tracker) and the metrics it hands to its ``Tracking`` logger).

What cannot run here and is replaced, speaking verl's interfaces: the Ray actors (``run_ppo`` calls the task
runner in this process, with the recipe's ``worker_process_setup_hook`` called first, as Ray would; the agent-loop
workers are verl's ``AgentLoopWorker`` objects in this process); ``RayPPOTrainer.init_workers``' GPU part (FSDP
actor worker group → :class:`CpuActor`, which returns zero log-probs in verl's no-padding layout, records the
batch it is asked to train on, and saves/loads a small marker as its "weights"; vLLM replicas and their weight
sync → :class:`NoWeightSync`; the inference server → ``verl_support.ScriptedServer``).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import verl.utils.tensordict_utils as tu
import verl.utils.tracking as tracking
from verl.experimental.agent_loop import agent_loop as verl_agent_loop
from verl.trainer import main_ppo
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils.import_utils import load_class_from_fqn

from verl_support import ScriptedServer


class CpuActor:
    """Stands in for the FSDP ``ActorRolloutRefWorker`` group (one data-parallel rank)."""

    def __init__(self) -> None:
        self._dispatch_info: dict[str, list[int]] = {}
        self.trained: list[Any] = []
        self.saved: list[tuple[str, int]] = []
        self.loaded: list[str] = []
        self.updates = 0

    def _query_dispatch_info(self, role: str) -> list[int]:
        return [0]

    def compute_log_prob(self, data: Any) -> Any:
        ids = data["input_ids"]
        zeros = torch.nested.nested_tensor_from_jagged(torch.zeros(ids.values().shape[0]), offsets=ids.offsets())
        return tu.get_tensordict({"log_probs": zeros, "entropy": zeros.clone()}, {"metrics": {"mfu": 0.0}})

    def update_actor(self, data: Any) -> Any:
        self.trained.append(data)
        self.updates += 1
        return tu.get_tensordict({}, {"metrics": {"mfu": 0.0, "pg_loss": [0.0]}})

    def save_checkpoint(self, local_path: str, hdfs_path: str | None = None, global_step: int = 0,
                        max_ckpt_to_keep: int | None = None) -> None:
        Path(local_path).mkdir(parents=True, exist_ok=True)
        (Path(local_path) / "cpu_actor.json").write_text(json.dumps({"step": global_step, "updates": self.updates}))
        self.saved.append((local_path, global_step))

    def load_checkpoint(self, local_path: str, hdfs_path: str | None = None, del_local_after_load: bool = False
                        ) -> None:
        self.updates = json.loads((Path(local_path) / "cpu_actor.json").read_text())["updates"]
        self.loaded.append(local_path)


class NoWeightSync:
    """Stands in for verl's ``CheckpointEngineManager`` (weight sync to vLLM replicas: none here)."""

    def update_weights(self, global_steps: int | None = None) -> None:
        return None

    def sleep_replicas(self) -> None:
        return None


class LocalActor:
    """A verl ``AgentLoopWorker`` in this process, called the way the manager calls a Ray actor."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def __getattr__(self, name: str) -> Any:
        return SimpleNamespace(remote=getattr(self.worker, name))


class Run:
    """One ``main_ppo`` run: what the stand-ins saw."""

    def __init__(self, scripts: dict[int, dict[str, Any]]) -> None:
        self.scripts = scripts
        self.runner_class: Any = None
        self.config: Any = None
        self.trainer: Any = None
        self.actor = CpuActor()
        self.server: ScriptedServer | None = None
        self.logged: list[tuple[int, dict[str, Any]]] = []


def run_main_ppo(argv: list[str], scripts: dict[int, dict[str, Any]], monkeypatch: Any,
                 actor: CpuActor | None = None, sibling_mode: dict[int, str] | None = None,
                 mode: dict[int, str] | None = None) -> Run:
    """``python -m verl.trainer.main_ppo <argv>`` with the stand-ins above; returns what they saw."""
    run = Run(scripts)
    if actor is not None:
        run.actor = actor

    def in_process_run_ppo(config: Any, task_runner_class: Any) -> None:
        run.runner_class, run.config = task_runner_class, config
        hook = config.ray_kwargs.ray_init.runtime_env.get("worker_process_setup_hook")
        if hook:  # what Ray runs first in every worker process
            module, _, name = str(hook).rpartition(".")
            getattr(importlib.import_module(module), name)()
        task_runner_class.__ray_actor_class__().run(config)

    def cpu_init_workers(trainer: Any) -> None:
        run.trainer = trainer
        trainer.actor_rollout_wg = run.actor
        trainer.ref_policy_wg = run.actor if trainer.use_reference_policy else None
        run.server = ScriptedServer(trainer.tokenizer, scripts)
        run.server.sibling_mode.update(sibling_mode or {})
        run.server.mode.update(mode or {})
        fqn = trainer.config.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class")
        manager = load_class_from_fqn(fqn, "AgentLoopManager") if fqn else verl_agent_loop.AgentLoopManager
        trainer.async_rollout_mode = True
        trainer.teacher_model_manager = None
        trainer.distillation_config = None
        trainer.async_rollout_manager = manager.create(config=trainer.config, llm_client=run.server,
                                                       teacher_client=None, reward_loop_worker_handles=None)
        trainer.checkpoint_manager = NoWeightSync()

    async def local_workers(manager: Any) -> None:
        count = manager.rollout_config.agent.num_workers
        manager.agent_loop_workers = [
            LocalActor(verl_agent_loop.AgentLoopWorker(manager.config, manager.llm_client, manager.teacher_client,
                                                       manager.reward_loop_worker_handles))
            for _ in range(count)]

    real_log = tracking.Tracking.log

    def log(self: Any, data: dict[str, Any], step: int, *args: Any, **kwargs: Any) -> None:
        run.logged.append((step, dict(data)))
        real_log(self, data, step, *args, **kwargs)

    monkeypatch.setattr(main_ppo, "run_ppo", in_process_run_ppo)
    monkeypatch.setattr(RayPPOTrainer, "init_workers", cpu_init_workers)
    monkeypatch.setattr(verl_agent_loop.AgentLoopManager, "_init_agent_loop_workers", local_workers)
    monkeypatch.setattr(tracking.Tracking, "log", log)
    monkeypatch.setattr(sys, "argv", ["verl.trainer.main_ppo", *argv])
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # Hydra re-raises verl's exception instead of exiting
    main_ppo.main()
    return run
