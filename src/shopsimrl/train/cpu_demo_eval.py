"""The evaluation stage of the CPU recipe: every checkpoint and two built-in baselines on the same val tasks.

Rows (``results.json`` ``eval.checkpoints``, in this order): ``init`` (the random-init model; only with
``eval_init``), ``random``, ``first`` and ``heuristic`` (the built-in trivial and public-information policies:
what a trained model should at least match), ``sft``,
``grpo``, and ``sft-auto``: the SFT checkpoint sampled freely (``tool_choice="auto"``). Under the recipe's
``tool_choice="required"`` every turn is decoded as one call of the page's tools, so a protocol error cannot
happen and its 0% says nothing; the free-sampling row's rate is the call format's learning signal. Each
checkpoint is served on a loopback OpenAI-compatible endpoint (:mod:`shopsimrl.train.checkpoint_server`) and
measured by ``shopsimrl eval``; ``compare.json`` is ``shopsimrl compare`` of SFT vs GRPO (paired bootstrap).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent.prompt import sha256_json
from ..errors import ConfigError

if TYPE_CHECKING:
    from .cpu_demo_config import RecipeConfig

BASELINES = ("random", "first", "heuristic")
AUTO = "sft-auto"  # the SFT checkpoint with tool_choice="auto"


def _row(result: Any) -> dict[str, Any]:
    summary = result.summary
    tasks = sorted({job.task_id for job in result.plan.jobs()})
    return {"success": summary["primary"]["success_rate"], "r_strict": summary["primary"]["reward_mean"],
            "protocol_error_rate": summary["behavior"]["protocol_error_rate"],
            "steps": summary["behavior"]["steps_mean"], "episodes": summary["counts"]["completed"],
            "terminations": summary["behavior"]["termination_reasons"], "tasks_sha256": sha256_json(tasks)}


def _settings(cfg: RecipeConfig, run: Path, **kwargs: Any) -> Any:
    from ..eval.runner import EvalSettings

    return EvalSettings(data=cfg.data, out=str(run), split=cfg.eval_split, seed=cfg.seed, max_steps=cfg.max_turns,
                        concurrency=cfg.eval_concurrency, sample_size=cfg.eval_tasks, **kwargs)


def evaluate_checkpoint(cfg: RecipeConfig, name: str, path: Path, run: Path, *,
                        tool_choice: str | None = None) -> dict[str, Any]:
    """Serve ``path`` on loopback and run ``shopsimrl eval`` against it (``tool_choice``: the recipe's if None)."""
    from ..agent.model_client import ModelSettings
    from .checkpoint_server import create_app, serving
    from .cpu_demo import _eval_run, load

    model, tokenizer = load(path, use_cpu=cfg.use_cpu)
    app = create_app(model, tokenizer, model_name=f"cpu-demo-{name}", max_new_tokens=cfg.max_new_tokens,
                     max_context=cfg.max_context,
                     max_batch=cfg.eval_concurrency if cfg.batched_decoding else None)
    with serving(app) as url:
        settings = _settings(cfg, run, model=ModelSettings(
            base_url=url, model=f"cpu-demo-{name}", temperature=cfg.eval_temperature, max_tokens=cfg.max_new_tokens,
            send_seed=True, checkpoint_id=str(path), tool_choice=tool_choice or cfg.tool_choice, timeout=600.0))
        result = _eval_run(settings, f"eval {name}")
    return {**_row(result), "tool_choice": tool_choice or cfg.tool_choice}


def evaluate_policy(cfg: RecipeConfig, policy: str, run: Path) -> dict[str, Any]:
    """A built-in policy on the checkpoints' tasks (same split, sample, seed and turn limit)."""
    from .cpu_demo import _eval_run

    return {**_row(_eval_run(_settings(cfg, run, policy=policy), f"eval {policy}")), "policy": policy}


def stage_eval(cfg: RecipeConfig) -> dict[str, Any]:
    from ..eval.compare import compare_runs
    from .cpu_demo import _paths

    paths = _paths(Path(cfg.out))
    runs = paths["eval"]
    jobs: list[tuple[str, Any]] = [
        *([("init", lambda: evaluate_checkpoint(cfg, "init", paths["init"], runs / "init"))] if cfg.eval_init else []),
        *((p, lambda p=p: evaluate_policy(cfg, p, runs / p)) for p in BASELINES),
        ("sft", lambda: evaluate_checkpoint(cfg, "sft", paths["sft"], runs / "sft")),
        ("grpo", lambda: evaluate_checkpoint(cfg, "grpo", paths["grpo"], runs / "grpo"))]
    if cfg.eval_unconstrained:
        jobs.append((AUTO, lambda: evaluate_checkpoint(cfg, AUTO, paths["sft"], runs / AUTO, tool_choice="auto")))
    table: dict[str, Any] = {}
    for name, job in jobs:
        start = time.perf_counter()
        table[name] = job()
        table[name]["wall_s"] = round(time.perf_counter() - start, 1)
    if len({row["tasks_sha256"] for row in table.values()}) != 1:  # the same val tasks in every row, or no table
        raise ConfigError("the evaluation rows ran on different task lists", code="recipe")
    comparison = compare_runs(str(runs / "sft"), str(runs / "grpo"))
    (Path(cfg.out) / "compare.json").write_text(json.dumps(comparison, indent=2, ensure_ascii=False),
                                                encoding="utf-8")
    return {"checkpoints": table, "compare": {k: comparison["metrics"][k] for k in comparison["metrics"]},
            "paired_episodes": comparison["paired_episodes"]}
