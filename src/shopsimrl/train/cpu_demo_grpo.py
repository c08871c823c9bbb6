"""The GRPO stage of the CPU recipe: TRL's ``GRPOTrainer`` driven by the project's ``make_rollout_func``.

The rollout function is the production one; this module only wraps it to record, per optimizer step, what a
training curve needs (reward, success, protocol-error rate, episode length, sampled tokens per second) and
the verdict of :func:`shopsimrl.train.groups.group_decision` on each group (kept, zero spread, unscored). TRL
computes the advantages itself with ``scale_rewards="group"``: reward minus the group mean over the group's
standard deviation, the rule of :func:`~shopsimrl.train.groups.group_advantages`; a zero-spread group gets
advantage 0, i.e. no gradient, which is what the filter's drop means for a fixed-size batch.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .groups import DROP_UNSCORED, DROP_ZERO_SPREAD, KEEP, group_decision

if TYPE_CHECKING:
    from .cpu_demo import RecipeConfig


def rollout_metrics(out: dict[str, Any], trajectories_steps: list[list[dict[str, Any]]], successes: list[float],
                    group_size: int) -> dict[str, float]:
    rewards = [r for r in out["shop_reward"] if r is not None]
    steps = [s for episode in trajectories_steps for s in episode]
    protocol = sum(1 for s in steps if s.get("protocol_error"))
    decisions = []
    for start in range(0, len(out["shop_reward"]), group_size):
        group = out["shop_reward"][start: start + group_size]
        decisions.append(group_decision([r is not None for r in group],
                                        {i: float(r) for i, r in enumerate(group) if r is not None}))
    n = max(1, len(decisions))
    return {"reward_mean": sum(rewards) / max(1, len(rewards)),
            "success": sum(successes) / max(1, len(successes)),
            "protocol_error_rate": protocol / max(1, len(steps)),
            "episode_turns": len(steps) / max(1, len(trajectories_steps)),
            "groups_kept": decisions.count(KEEP) / n, "groups_zero_spread": decisions.count(DROP_ZERO_SPREAD) / n,
            "groups_unscored": decisions.count(DROP_UNSCORED) / n}


def run_grpo(cfg: RecipeConfig, model: Any, tokenizer: Any, target: Path, *,
             generate_factory: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """GRPO from ``model``; ``generate_factory`` replaces the model's own sampler (wiring checks in tests)."""
    import importlib

    import datasets

    trl: Any = importlib.import_module("trl")

    from ..agent import InProcessEnvironment
    from ..env import ShopWorld
    from . import trl as trl_adapter
    from .local_lm import CachedGenerate, time_budget

    world = ShopWorld.from_data_dir(cfg.data)
    ids = list(world.catalog.split("train"))
    random.Random(cfg.seed).shuffle(ids)
    batch = cfg.group_size * cfg.groups_per_step
    ids = ids[: max(cfg.groups_per_step, cfg.grpo_steps * cfg.groups_per_step)]
    dataset = datasets.Dataset.from_dict(trl_adapter.task_prompts(ids))
    curve: list[dict[str, Any]] = []
    samplers: list[Any] = []

    def factory(trainer: Any) -> Any:
        if generate_factory is not None:
            sampler = generate_factory(trainer)
        else:
            sampler = CachedGenerate(trainer.accelerator.unwrap_model(trainer.model), tokenizer,
                                     max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                     seed=cfg.seed * 100_003 + len(samplers), tool_choice=cfg.tool_choice)
        samplers.append(sampler)
        return sampler

    captured: list[Any] = []
    inner = trl_adapter.make_rollout_func(InProcessEnvironment(world), max_new_tokens=cfg.max_new_tokens,
                                          temperature=cfg.temperature, max_steps=cfg.max_turns, concurrency=1,
                                          generate_factory=factory, max_context=cfg.max_context,
                                          on_trajectories=lambda trajectories, trainer: captured.append(trajectories))

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        start = time.perf_counter()
        out = inner(prompts, trainer)
        wall = time.perf_counter() - start
        trajectories = captured.pop()
        sampled = sum(len(t.generated_tokens) for t in trajectories)
        row = {"step": trainer.state.global_step + 1, "episodes": len(prompts), "rollout_s": round(wall, 2),
               "sampled_tokens": sampled, "prefill_tokens": getattr(samplers[-1], "prefill_tokens", 0),
               "sampled_tokens_per_s": sampled / wall if wall else 0.0,
               "sequence_tokens_mean": sum(len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"],
                                                                           strict=True)) / max(1, len(prompts)),
               **rollout_metrics(out, [t.steps for t in trajectories], [t.success for t in trajectories],
                                 cfg.group_size)}
        curve.append(row)
        trl_adapter._log(trainer, {f"shop/{k}": float(v) for k, v in row.items() if k != "step"})
        return out

    args = trl.GRPOConfig(
        output_dir=str(target / "trainer"), num_generations=cfg.group_size, per_device_train_batch_size=batch,
        max_steps=cfg.grpo_steps, learning_rate=cfg.grpo_lr, lr_scheduler_type="constant", beta=0.0,
        temperature=cfg.temperature, top_p=1.0, max_completion_length=cfg.max_context + cfg.max_turns * 4096,
        scale_rewards="group", logging_steps=1, save_strategy="no", report_to=[], use_cpu=cfg.use_cpu, bf16=False,
        seed=cfg.seed, dataloader_num_workers=0, shuffle_dataset=False, weight_decay=0.0, max_grad_norm=1.0,
        gradient_checkpointing=False)  # TRL turns it on by default: pure overhead for a model this small
    trainer: Any = trl.GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=trl_adapter.shop_reward,
                          train_dataset=dataset, rollout_func=rollout_func, args=args,
                          callbacks=time_budget(cfg.grpo_minutes))
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    trainer.model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    logs = trainer.state.log_history
    target.mkdir(parents=True, exist_ok=True)
    (target / "log.jsonl").write_text("".join(json.dumps(h, sort_keys=True) + "\n" for h in logs), encoding="utf-8")
    (target / "rollouts.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in curve),
                                           encoding="utf-8")
    return {"steps": trainer.state.global_step, "episodes": sum(r["episodes"] for r in curve),
            "train_s": round(wall, 1), "tasks": len(ids)}
