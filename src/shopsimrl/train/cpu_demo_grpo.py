"""The GRPO stage of the CPU recipe: TRL's ``GRPOTrainer`` driven by the project's ``make_rollout_func``.

The rollout function is the production one; this module only wraps it to record, per optimizer step, what a
training curve needs (reward, success, protocol-error rate, episode length, sampled tokens per second) and
the verdict of :func:`shopsimrl.train.groups.group_decision` on each group (kept, zero spread, unscored). TRL
computes the advantages itself with ``scale_rewards="group"``: reward minus the group mean over the group's
standard deviation, the rule of :func:`~shopsimrl.train.groups.group_advantages`; a zero-spread group gets
advantage 0, i.e. no gradient.

Dynamic sampling (DAPO; ``grpo_dynamic``, the default): a step's groups are rolled out, and while fewer than
``groups_per_step`` of them have reward spread, further groups are drawn from the rest of the train task stream
and rolled out (at most ``grpo_max_groups`` in all); the update is on groups with spread only, so a step is an
informative update whenever one was found (a step that found too few is filled with zero-spread groups, whose
advantage, and so gradient, is 0). Each step logs the groups sampled, kept and zero-spread.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .groups import DROP_UNSCORED, DROP_ZERO_SPREAD, KEEP, group_decision

if TYPE_CHECKING:
    from .cpu_demo_config import RecipeConfig


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


def group_outputs(out: Mapping[str, Any], group_size: int) -> list[dict[str, Any]]:
    """A rollout_func output split into its groups (every per-episode list cut in blocks of ``group_size``)."""
    n = len(out["shop_reward"])
    per_episode = [k for k, v in out.items() if isinstance(v, list) and len(v) == n]
    return [{k: out[k][i: i + group_size] for k in per_episode} for i in range(0, n, group_size)]


def join_groups(groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: [x for g in groups for x in g[k]] for k in groups[0]}


def _decision(group: Mapping[str, Any]) -> str:
    rewards = group["shop_reward"]
    return group_decision([r is not None for r in rewards], {i: float(r) for i, r in enumerate(rewards) if r is not None})


def _batch_mean(sampler: Any) -> float:
    """Turns per decoded batch (1.0 for the one-turn-at-a-time sampler)."""
    batches = getattr(sampler, "batches", None)
    return sum(batches) / len(batches) if batches else 1.0


def dynamic_rollout(roll: Callable[[list[str]], dict[str, Any]], prompts: list[str], *, group_size: int,
                    want: int, max_groups: int, stream: Iterator[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """Roll out ``prompts`` and then groups of ``stream``'s tasks until ``want`` groups have reward spread (at most
    ``max_groups`` groups); the output holds ``want`` groups, those with spread first (DAPO's dynamic sampling)."""
    kept: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    counts = {"sampled": 0, "kept": 0, "zero_spread": 0, "unscored": 0}
    batch = prompts
    while True:
        for group in group_outputs(roll(batch), group_size):
            decision = _decision(group)
            counts["sampled"] += 1
            counts[{KEEP: "kept", DROP_ZERO_SPREAD: "zero_spread"}.get(decision, "unscored")] += 1
            (kept if decision == KEEP else others).append(group)
        # the step's own groups with spread: what the update would hold without dynamic sampling
        counts.setdefault("first_kept", counts["kept"])
        more = min(want - len(kept), max_groups - counts["sampled"])
        if more <= 0:
            break
        batch = [task for task in itertools.islice(stream, more) for _ in range(group_size)]
    chosen = (kept + others)[:want]
    counts["trained"] = sum(1 for g in chosen if _decision(g) == KEEP)
    return join_groups(chosen), counts


def sample_step(cfg: RecipeConfig, roll: Callable[[list[str]], dict[str, Any]], prompts: list[str],
                stream: Iterator[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """One step's rollouts and group counts: dynamic sampling, or (``grpo_dynamic`` off) the groups drawn."""
    if cfg.grpo_dynamic:
        return dynamic_rollout(roll, prompts, group_size=cfg.group_size, want=cfg.groups_per_step,
                               max_groups=cfg.grpo_max_groups or 4 * cfg.groups_per_step, stream=stream)
    out = roll(prompts)
    decisions = [_decision(g) for g in group_outputs(out, cfg.group_size)]
    return out, {"sampled": len(decisions), "kept": decisions.count(KEEP),
                 "zero_spread": decisions.count(DROP_ZERO_SPREAD), "unscored": decisions.count(DROP_UNSCORED),
                 "trained": decisions.count(KEEP), "first_kept": decisions.count(KEEP)}


def curve_row(cfg: RecipeConfig, out: Mapping[str, Any], sampled: list[tuple[dict[str, Any], list[Any]]],
              groups: Mapping[str, int], wall: float, sampler: Any, *, step: int) -> dict[str, Any]:
    """A step's training-curve row: over every episode sampled (``sampled``), sequence lengths over those trained."""
    every = join_groups([g for got, _ in sampled for g in group_outputs(got, cfg.group_size)])
    trajectories = [t for _, batch_trajectories in sampled for t in batch_trajectories]
    tokens = sum(len(t.generated_tokens) for t in trajectories)
    trained = len(out["prompt_ids"])
    return {"step": step, "episodes": len(trajectories), "rollout_s": round(wall, 2),
            "sampled_tokens": tokens, "prefill_tokens": getattr(sampler, "prefill_tokens", 0),
            "sampled_tokens_per_s": tokens / wall if wall else 0.0, "decode_batch_mean": _batch_mean(sampler),
            "sequence_tokens_mean": sum(len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"],
                                                                        strict=True)) / max(1, trained),
            **rollout_metrics(every, [t.steps for t in trajectories], [t.success for t in trajectories],
                              cfg.group_size),
            **{f"groups_{k}_count": v for k, v in groups.items()}}


def run_grpo(cfg: RecipeConfig, model: Any, tokenizer: Any, target: Path, *,
             generate_factory: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """GRPO from ``model``; ``generate_factory`` replaces the model's own sampler (wiring checks in tests)."""
    import importlib

    import datasets

    trl: Any = importlib.import_module("trl")

    from ..agent import InProcessEnvironment
    from ..env import ShopWorld
    from . import trl as trl_adapter
    from .batched_generate import BatchedGenerate
    from .local_lm import CachedGenerate, accelerated, time_budget

    world = ShopWorld.from_data_dir(cfg.data)
    ids = train_task_ids(cfg)
    batch = cfg.group_size * cfg.groups_per_step
    head = max(cfg.groups_per_step, cfg.grpo_steps * cfg.groups_per_step)
    # the dynamic sampler's extra groups: the train tasks the dataset does not hold, then the rest again
    stream = itertools.cycle([str(t) for t in (ids[head:] or ids)])
    ids = ids[:head]
    dataset = datasets.Dataset.from_dict(trl_adapter.task_prompts(ids))
    curve: list[dict[str, Any]] = []
    samplers: list[Any] = []

    def factory(trainer: Any) -> Any:
        if generate_factory is not None:
            sampler = generate_factory(trainer)
        else:
            kind = BatchedGenerate if cfg.batched_decoding else CachedGenerate
            sampler = kind(trainer.accelerator.unwrap_model(trainer.model), tokenizer,
                           max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                           seed=cfg.seed * 100_003 + len(samplers), tool_choice=cfg.tool_choice)
        samplers.append(sampler)
        return sampler

    captured: list[Any] = []
    inner = trl_adapter.make_rollout_func(InProcessEnvironment(world), max_new_tokens=cfg.max_new_tokens,
                                          temperature=cfg.temperature, max_steps=cfg.max_turns,
                                          concurrency=cfg.grpo_concurrency,
                                          generate_factory=factory, max_context=cfg.max_context,
                                          on_trajectories=lambda trajectories, trainer: captured.append(trajectories))

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        start = time.perf_counter()
        sampled: list[Any] = []

        def roll(batch_prompts: list[str]) -> dict[str, Any]:
            got = inner(batch_prompts, trainer)
            sampled.append((got, captured.pop()))
            return got

        out, groups = sample_step(cfg, roll, list(prompts), stream)
        row = curve_row(cfg, out, sampled, groups, time.perf_counter() - start, samplers[-1],
                        step=trainer.state.global_step + 1)
        curve.append(row)
        trl_adapter._log(trainer, {f"shop/{k}": float(v) for k, v in row.items() if k != "step"})
        return out

    args = trl.GRPOConfig(
        output_dir=str(target / "trainer"), num_generations=cfg.group_size, per_device_train_batch_size=batch,
        max_steps=cfg.grpo_steps, learning_rate=cfg.grpo_lr, lr_scheduler_type="constant", beta=0.0,
        temperature=cfg.temperature, top_p=1.0, max_completion_length=cfg.max_context + cfg.max_turns * 4096,
        scale_rewards="group", logging_steps=1, save_strategy="no", report_to=[], use_cpu=cfg.use_cpu, bf16=accelerated(cfg.use_cpu),
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
    _write_logs(target, trainer.state.log_history, curve)
    return {"steps": trainer.state.global_step, "episodes": sum(r["episodes"] for r in curve),
            "train_s": round(wall, 1), "tasks": len(ids), "dynamic": cfg.grpo_dynamic,
            "groups_per_step": cfg.groups_per_step, "difficulty": cfg.grpo_difficulty, "groups": group_totals(curve)}


def _write_logs(target: Path, logs: list[dict[str, Any]], curve: list[dict[str, Any]]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    (target / "log.jsonl").write_text("".join(json.dumps(h, sort_keys=True) + "\n" for h in logs), encoding="utf-8")
    (target / "rollouts.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in curve),
                                           encoding="utf-8")


def train_task_ids(cfg: RecipeConfig) -> list[int]:
    """The GRPO task stream: the train split (of ``grpo_difficulty``'s tiers), in the seed's order."""
    from ..agent.tier_cascade import ensure_tiers
    from ..catalog.tiers import split_task_ids

    if cfg.grpo_difficulty is not None:
        ensure_tiers(cfg.data)  # a fresh catalog: computed once (~1 min on 2 cores)
    ids = split_task_ids(cfg.data, "train", difficulty=cfg.grpo_difficulty)
    random.Random(cfg.seed).shuffle(ids)
    return ids


def group_totals(curve: list[dict[str, Any]]) -> dict[str, int]:
    """The groups of every step summed, and the steps whose update held at least one group with spread; with
    ``first_kept`` (the step's own groups with spread) the same two figures without dynamic sampling."""
    totals = {k: sum(int(r[f"groups_{k}_count"]) for r in curve)
              for k in ("sampled", "kept", "zero_spread", "unscored", "trained")}
    totals["informative_steps"] = sum(1 for r in curve if r["groups_trained_count"] > 0)
    if curve and all("groups_first_kept_count" in r for r in curve):
        totals["first_kept"] = sum(int(r["groups_first_kept_count"]) for r in curve)
        totals["first_informative_steps"] = sum(1 for r in curve if r["groups_first_kept_count"] > 0)
    return totals
