"""Paired comparison of two runs over the same tasks (docs/contract.md#evaluation).

Alignment first: both plans must share the pipeline version, the task split and job list, the environment
(catalog, versions, persona mode; not the adapter — an in-process run and a service run are comparable), and
the runtime limits; every task key must be completed in both runs. A single-turn run and a dialogue run
(``--shopper``) of the same tasks are comparable: for that pair only, the interaction mode and the turn limit
(:data:`DIALOGUE_IGNORED`, which the shopper implies) are ignored and named in the warnings; two different
shoppers are not comparable. Then, per metric, a task-paired percentile
bootstrap of the mean difference (B − A) with 10,000 resamples, seeded per metric with the first eight bytes
of SHA-256(``"20260901:<metric>"``), linear-interpolated 95% percentiles; and the success transition table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from rich.table import Table

from ..errors import ConfigError
from ..stamps import plan_stamps, stamp_differences
from .clusters import CLUSTERINGS, cluster_bootstrap, plan_clusters
from .report_stats import clustered_cell
from .rundir import RunDir, is_completed
from .summary import reward_detail, step_counts
from .taxonomy import CAUSE_TITLES, cause_changes

BOOTSTRAP_SEED = 20260901
DEFAULT_RESAMPLES = 10_000
COMPONENTS = ("r_strict", "r_success", "r_loose", "r_type", "r_att", "r_option", "r_price")
ENVIRONMENT_KEYS = ("persona", "interaction_mode", "environment_version", "observation_version", "tool_version",
                    "catalog")
# What a shopper implies (multi_turn, 40 turns): ignored when exactly one of the two runs is a dialogue run.
DIALOGUE_IGNORED = ("environment interaction_mode", "runtime max_steps")


def metric_seed(metric: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{BOOTSTRAP_SEED}:{metric}".encode()).digest()[:8], "big")


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, metric: str, resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Mean difference ``b − a`` over paired tasks with its percentile bootstrap interval."""
    if len(a) != len(b) or not a:
        raise ConfigError("a paired bootstrap needs two equally long, non-empty samples", code="comparison")
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = len(diff)
    rng = np.random.default_rng(metric_seed(metric))
    means = diff[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], method="linear")
    return {
        "metric": metric, "n": n, "mean_a": float(np.mean(a)), "mean_b": float(np.mean(b)),
        "diff": float(diff.mean()), "ci_low": float(low), "ci_high": float(high), "confidence": confidence,
        "resamples": resamples, "seed": metric_seed(metric),
    }


def task_key(record: Mapping[str, Any]) -> tuple[str, int, int]:
    job = record["job"]
    return (str(job["split"]), int(job["task_id"]), int(job["sample_id"]))


def episode_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The per-episode values compared between runs."""
    detail = reward_detail(record)
    counts = step_counts(record)
    steps = counts["steps"]
    out = {key: float(detail.get(key) or 0.0) for key in COMPONENTS}
    out.update({
        "steps": float(steps),
        "protocol_error_rate": counts["protocol_errors"] / steps if steps else 0.0,
        "policy_failure_rate": counts["policy_failures"] / steps if steps else 0.0,
        "invalid_action_rate": counts["invalid_actions"] / counts["actions"] if counts["actions"] else 0.0,
        "completion_tokens": float(counts.get("completion_tokens", 0)),
        "total_tokens": float(counts.get("total_tokens", 0)),
    })
    return out


def _env(plan: Mapping[str, Any]) -> dict[str, Any]:
    return {key: plan.get("environment", {}).get(key) for key in ENVIRONMENT_KEYS}


def _jobs(plan: Mapping[str, Any]) -> list[tuple[str, int, int, int]]:
    return [(j["split"], j["task_id"], j["sample_id"], j["seed"]) for j in plan.get("jobs", [])]


def _seed_conflicts(plan_a: Mapping[str, Any], plan_b: Mapping[str, Any]) -> int:
    """Episodes both plans hold (same split, task, sample) but with different seeds: never comparable."""
    seeds_a = {(split, task, sample): seed for split, task, sample, seed in _jobs(plan_a)}
    return sum(1 for split, task, sample, seed in _jobs(plan_b)
               if seeds_a.get((split, task, sample), seed) != seed)


def _shopper_model(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The LLM shopper's model and sampling in a plan (its address and key variable do not matter)."""
    identity = plan.get("environment", {}).get("shopper_llm") or {}
    return {key: value for key, value in identity.items() if key not in ("base_url", "api_key_env")}


# What the version stamps already say: with --allow-stamp-mismatch these differences are warnings, not problems.
STAMPED = ("environment environment_version", "environment catalog", "task split task_ids_sha256")


def check_alignment(
    plan_a: Mapping[str, Any], plan_b: Mapping[str, Any], *, partial: bool = False, allow_stamps: bool = False,
) -> dict[str, Any]:
    """What makes two plans incomparable. ``partial``: the task lists may differ (``--limit``, a sample, an
    unfinished run); the episodes both hold must still have the same seeds. ``allow_stamps``: runs on different
    version stamps (environment, generator, catalog, task set) are compared with a warning instead of refused."""
    problems, warnings = [], []
    stamps_a, stamps_b = plan_stamps(plan_a), plan_stamps(plan_b)
    differing = stamp_differences(stamps_a, stamps_b)
    if partial:  # a partial comparison pairs the common tasks: the task sets may differ
        differing = [line for line in differing if not line.startswith("task_set_sha256")]
    if differing and allow_stamps:
        warnings.append("version stamps differ (--allow-stamp-mismatch): " + "; ".join(differing))
    elif differing:
        problems.append("version stamps differ (" + "; ".join(differing) + "; --allow-stamp-mismatch compares "
                        "them with a warning)")
    if plan_a.get("pipeline_version") != plan_b.get("pipeline_version"):
        problems.append("pipeline versions differ")
    split_a, split_b = plan_a.get("task_split", {}), plan_b.get("task_split", {})
    for key in ("name", "persona") if partial else ("name", "task_ids_sha256", "persona"):
        if split_a.get(key) != split_b.get(key) and not (allow_stamps and f"task split {key}" in STAMPED):
            problems.append(f"task split {key} differs ({split_a.get(key)} vs {split_b.get(key)})")
    if partial:
        if conflicts := _seed_conflicts(plan_a, plan_b):
            problems.append(f"{conflicts} episodes held by both plans have different seeds")
    elif _jobs(plan_a) != _jobs(plan_b):
        problems.append("the job lists differ (tasks, samples or seeds; --allow-partial compares the common ones)")
    env_a, env_b = _env(plan_a), _env(plan_b)
    shopper_a = plan_a.get("environment", {}).get("shopper")
    shopper_b = plan_b.get("environment", {}).get("shopper")
    ignored: tuple[str, ...] = ()
    if shopper_a != shopper_b:
        if shopper_a is not None and shopper_b is not None:
            problems.append(f"environment shopper differs ({shopper_a} vs {shopper_b})")
        else:
            ignored = DIALOGUE_IGNORED
            warnings.append(f"single-turn vs dialogue (shopper {shopper_a or shopper_b!r}): ignored "
                            + ", ".join(ignored) + "; the dialogue run sees the shopper's opening, not the instruction")
    llm_a, llm_b = _shopper_model(plan_a), _shopper_model(plan_b)
    if shopper_a == shopper_b == "llm" and llm_a != llm_b:  # two LLM shoppers: the same model and sampling only
        problems.append(f"environment shopper model differs ({llm_a.get('model')} vs {llm_b.get('model')})")
    for key in ENVIRONMENT_KEYS:
        stamped = allow_stamps and f"environment {key}" in STAMPED
        if env_a[key] != env_b[key] and f"environment {key}" not in ignored and not stamped:
            problems.append(f"environment {key} differs")
    run_a, run_b = plan_a.get("runtime", {}), plan_b.get("runtime", {})
    for key in ("max_steps", "action_protocol"):
        if run_a.get(key) != run_b.get(key) and f"runtime {key}" not in ignored:
            problems.append(f"runtime {key} differs ({run_a.get(key)} vs {run_b.get(key)})")
    differs = [key for key in ("model", "prompt", "skills") if plan_a.get(key) != plan_b.get(key)]
    if not differs:
        warnings.append("the two plans use the same model, prompt and skills: differences are sampling noise")
    if plan_a.get("environment", {}).get("adapter") != plan_b.get("environment", {}).get("adapter"):
        warnings.append("one run used the in-process environment and the other the HTTP service")
    return {"problems": problems, "warnings": warnings, "differs_in": differs, "ignored": list(ignored),
            "stamps": {"a": stamps_a, "b": stamps_b}}


def add_clustered(
    metrics: Mapping[str, dict[str, Any]], per_a: Sequence[Mapping[str, float]], per_b: Sequence[Mapping[str, float]],
    tasks: Sequence[int], clusters: Mapping[str, Mapping[int, str]], *, resamples: int,
) -> None:
    """Beside each metric's task-paired interval, the paired difference's clustered intervals (eval/clusters.py)."""
    for clustering in CLUSTERINGS:
        labels = clusters.get(clustering) or {}
        if not tasks or not all(task in labels for task in tasks):
            continue
        for name, m in metrics.items():
            diff = [b[name] - a[name] for a, b in zip(per_a, per_b, strict=True)]
            got = cluster_bootstrap(diff, [labels[t] for t in tasks], metric=f"diff:{name}", clustering=clustering,
                                    resamples=resamples)
            m.setdefault("clustered", {})[clustering] = {key: got[key] for key in ("ci_low", "ci_high", "clusters",
                                                                                   "seed")}


def compare_runs(
    run_a: str, run_b: str, *, resamples: int = DEFAULT_RESAMPLES, allow_partial: bool = False,
    allow_stamp_mismatch: bool = False,
) -> dict[str, Any]:
    """Compare two run directories; raises :class:`ConfigError` (`comparison`) when they are not aligned."""
    dir_a, dir_b = RunDir(run_a), RunDir(run_b)
    plan_a, plan_b = dir_a.plan().plan, dir_b.plan().plan
    alignment = check_alignment(plan_a, plan_b, partial=allow_partial, allow_stamps=allow_stamp_mismatch)
    if alignment["problems"]:
        raise ConfigError(f"{run_a} and {run_b} are not comparable: " + "; ".join(alignment["problems"]), code="comparison")
    planned_b = {(split, task, sample) for split, task, sample, _ in _jobs(plan_b)}
    planned_a = [(split, task, sample) for split, task, sample, _ in _jobs(plan_a)]
    wanted = [key for key in planned_a if key in planned_b] if allow_partial else planned_a
    done_a = {task_key(r): r for r in dir_a.records().values() if is_completed(r)}
    done_b = {task_key(r): r for r in dir_b.records().values() if is_completed(r)}
    keys = [key for key in wanted if key in done_a and key in done_b]
    missing = len(wanted) - len(keys)
    if missing and not allow_partial:
        raise ConfigError(
            f"{missing} of {len(wanted)} episodes are not completed in both runs (resume them, or pass --allow-partial)", code="comparison"
        )
    if allow_partial:
        alignment["warnings"].append(
            f"compared {len(keys)} episodes completed in both runs (A planned {len(planned_a)}, "
            f"B planned {len(planned_b)}; {len(planned_a) + len(planned_b) - 2 * len(keys)} planned episodes left out)")
    if not keys:
        raise ConfigError("no episode is completed in both runs", code="comparison")
    per_a = [episode_metrics(done_a[key]) for key in keys]
    per_b = [episode_metrics(done_b[key]) for key in keys]
    names = list(per_a[0])
    metrics = {
        name: paired_bootstrap([m[name] for m in per_a], [m[name] for m in per_b], metric=name, resamples=resamples)
        for name in names
    }
    add_clustered(metrics, per_a, per_b, [key[1] for key in keys], plan_clusters(plan_a), resamples=resamples)
    success_a = [m["r_success"] == 1 for m in per_a]
    success_b = [m["r_success"] == 1 for m in per_b]
    transitions = {
        "fail_to_success": sum(1 for x, y in zip(success_a, success_b, strict=True) if not x and y),
        "success_to_fail": sum(1 for x, y in zip(success_a, success_b, strict=True) if x and not y),
        "both_success": sum(1 for x, y in zip(success_a, success_b, strict=True) if x and y),
        "neither": sum(1 for x, y in zip(success_a, success_b, strict=True) if not x and not y),
    }
    taxonomy = cause_changes((done_a[key], done_b[key]) for key in keys)
    return {
        "schema_version": "shopsimrl-comparison-v1",  # "taxonomy" was added without a version change
        "run_a": {"path": str(run_a), "experiment": plan_a.get("experiment"), "model_id": plan_a.get("model_id"),
                  "plan_fingerprint": dir_a.manifest().get("plan_fingerprint")},
        "run_b": {"path": str(run_b), "experiment": plan_b.get("experiment"), "model_id": plan_b.get("model_id"),
                  "plan_fingerprint": dir_b.manifest().get("plan_fingerprint")},
        "difference": "run_b - run_a", "paired_episodes": len(keys), "alignment": alignment,
        "metrics": metrics, "transitions": transitions, "taxonomy": taxonomy,
    }


def comparison_tables(result: Mapping[str, Any]) -> list[Table]:
    a, b = result["run_a"], result["run_b"]
    table = Table(title=f"{b['experiment']} − {a['experiment']} ({result['paired_episodes']} paired episodes, "
                        f"95% paired bootstrap)", header_style="bold")
    for column in ("metric", "A", "B", "B − A", "95% CI", "95% CI, leaf clusters"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for name, m in result["metrics"].items():
        scale, unit = (100.0, " pp") if name in ("r_success",) or name.endswith("_rate") else (1.0, "")
        table.add_row(
            name, f"{m['mean_a'] * scale:.4f}", f"{m['mean_b'] * scale:.4f}", f"{m['diff'] * scale:+.4f}{unit}",
            f"[{m['ci_low'] * scale:+.4f}, {m['ci_high'] * scale:+.4f}]", clustered_cell(m, scale=scale),
        )
    t = result["transitions"]
    trans = Table(title="success transitions (A → B)", header_style="bold")
    for column in ("fail → success", "success → fail", "both succeed", "neither"):
        trans.add_column(column, justify="right")
    trans.add_row(str(t["fail_to_success"]), str(t["success_to_fail"]), str(t["both_success"]), str(t["neither"]))
    tables = [table, trans]
    changes = result.get("taxonomy")
    if changes:
        titles = {**CAUSE_TITLES, "success": "success"}
        causes = Table(title=f"outcome / primary failure cause (A → B; {changes['changed']} episodes changed)",
                       header_style="bold")
        for column in ("outcome", "A", "B", "B − A"):
            causes.add_column(column, justify="left" if column == "outcome" else "right")
        for cause, v in changes["causes"].items():
            causes.add_row(titles[cause], str(v["a"]), str(v["b"]), f"{v['diff']:+d}")
        tables.append(causes)
    return tables
