"""Clustered bootstrap intervals: error bars over the unit of randomisation, not the episode.

Episodes are not independent draws: tasks of one leaf category share products, confusers and query words, and
persona tasks of one linked group (shared product, instruction, persona or user: ``catalog.splits.link_groups``)
share their shopper. A percentile bootstrap that resamples episodes treats them as independent and is too
narrow; the clustered bootstrap resamples whole clusters with replacement and takes the ratio mean (episodes'
sum over the drawn clusters / their count). Clusters: ``leaf_category`` (the goal's category path) for every
task, and ``persona_group`` (the linked group among the evaluated persona tasks) for persona tasks. 10,000
resamples, 95% linear-interpolated percentiles, each (metric, clustering) seeded with the first eight bytes of
SHA-256(``"20260902:<metric>:<clustering>"``); ``episode`` is the plain bootstrap beside them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

CLUSTER_SEED = 20260902
DEFAULT_RESAMPLES = 10_000
CHUNK_DRAWS = 2_000_000  # cluster draws held at once (~16 MB per array), whatever the run's size
CLUSTERINGS = ("leaf_category", "persona_group")


def cluster_seed(metric: str, clustering: str) -> int:
    digest = hashlib.sha256(f"{CLUSTER_SEED}:{metric}:{clustering}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def cluster_bootstrap(
    values: Sequence[float], clusters: Sequence[str], *, metric: str, clustering: str,
    resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95,
) -> dict[str, Any]:
    """The mean of ``values`` with a percentile interval from resampling whole ``clusters`` (one label each)."""
    if len(values) != len(clusters) or not values:
        raise ValueError("a clustered bootstrap needs one cluster label per value, and at least one value")
    labels = sorted(set(clusters))
    index = {label: i for i, label in enumerate(labels)}
    sums, counts = np.zeros(len(labels)), np.zeros(len(labels))
    for value, label in zip(values, clusters, strict=True):
        sums[index[label]] += float(value)
        counts[index[label]] += 1
    rng = np.random.default_rng(cluster_seed(metric, clustering))
    means = []
    chunk = max(1, CHUNK_DRAWS // len(labels))
    for start in range(0, resamples, chunk):
        draw = rng.integers(0, len(labels), size=(min(chunk, resamples - start), len(labels)))
        means.append(sums[draw].sum(axis=1) / counts[draw].sum(axis=1))
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(np.concatenate(means), [tail, 100 - tail], method="linear")
    return {"mean": float(sums.sum() / counts.sum()), "ci_low": float(low), "ci_high": float(high),
            "clusters": len(labels), "n": len(values), "resamples": resamples, "confidence": confidence,
            "seed": cluster_seed(metric, clustering)}


def task_clusters(data_dir: str | Path, task_ids: Sequence[int]) -> dict[str, dict[int, str]]:
    """Per clustering, each task's cluster label (``persona_group``: persona tasks only; empty when none)."""
    from ..catalog.splits import PersonaTask, link_groups
    from ..catalog.store import Catalog

    catalog = Catalog.from_data_dir(data_dir)
    wanted = sorted(set(task_ids))
    goals = {task: catalog.goal(task) for task in wanted}
    leaf = {task: str(goal.get("category") or "unknown") for task, goal in goals.items()}
    persona = [PersonaTask(task, str(goal["asin"]), str(goal.get("instruction_simple") or ""),
                           str(goal.get("instruction_text") or ""), goal["user_persona"])
               for task, goal in goals.items() if isinstance(goal.get("user_persona"), Mapping) and goal["user_persona"]]
    groups = {task: group.group_id for group in link_groups(persona) for task in group.task_ids}
    return {"leaf_category": leaf, "persona_group": groups}


def clustered_intervals(
    values: Mapping[str, Sequence[float]], tasks: Sequence[int], clusters: Mapping[str, Mapping[int, str]],
    *, resamples: int = DEFAULT_RESAMPLES,
) -> dict[str, dict[str, Any]]:
    """Per metric (``values``: one value per episode, in ``tasks`` order): the plain episode bootstrap and one
    clustered bootstrap per clustering that labels every episode's task."""
    out: dict[str, dict[str, Any]] = {}
    for metric, series in values.items():
        if not series:
            continue
        row = {"episode": cluster_bootstrap(series, [str(i) for i in range(len(series))], metric=metric,
                                            clustering="episode", resamples=resamples)}
        for clustering in CLUSTERINGS:
            labels = clusters.get(clustering) or {}
            if tasks and all(task in labels for task in tasks):
                row[clustering] = cluster_bootstrap(series, [labels[t] for t in tasks], metric=metric,
                                                    clustering=clustering, resamples=resamples)
        out[metric] = row
    return out


def plan_clusters(plan: Mapping[str, Any]) -> dict[str, dict[int, str]]:
    """The cluster labels of a plan's tasks, from its catalog (empty when the catalog is gone or has changed)."""
    from ..catalog.store import read_manifest
    from ..errors import ShopSimError

    data_dir = Path(str((plan.get("task_split") or {}).get("path") or "")).parent
    expected = ((plan.get("environment") or {}).get("catalog") or {}).get("data_sha256")
    try:
        if not (data_dir / "manifest.json").is_file() or read_manifest(data_dir).get("output_data_sha256") != expected:
            return {}
        return task_clusters(data_dir, [int(job["task_id"]) for job in plan.get("jobs") or []])
    except (OSError, ValueError, ShopSimError):
        return {}


def summary_intervals(
    completed: Sequence[Mapping[str, Any]], clusters: Mapping[str, Mapping[int, str]],
    *, resamples: int = DEFAULT_RESAMPLES,
) -> dict[str, dict[str, Any]]:
    """``r_strict`` and ``r_success`` of completed episodes: plain and clustered intervals (summary ``intervals``)."""
    tasks = [int(r["job"]["task_id"]) for r in completed]
    details = [((r.get("final") or {}).get("reward_detail") or {}) for r in completed]
    values = {metric: [float(d.get(metric) or 0.0) for d in details] for metric in ("r_strict", "r_success")}
    return clustered_intervals(values, tasks, clusters, resamples=resamples)
