"""What repeated runs of the same tasks say (``eval --repeats K``): the noise floor of an evaluation.

Per repeat (sample id), the success rate and the mean ``r_strict``; across repeats their mean and standard
deviation; per task, the number of successes c out of n repeats, from which pass^k (every one of k draws
succeeds, tau-bench's estimator C(c,k)/C(n,k)) and pass@k (at least one does, 1 - C(n-c,k)/C(n,k)) are
averaged over tasks; the flip rate is the share of tasks whose success differs between repeats (0 < c < n).
``identical`` says whether every task's repeats produced byte-identical episodes (reset, conversation and
final result in canonical JSON): true for built-in policies and the rule shopper, which ignore the sampling
seed, so their repeats measure nothing but determinism.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any


def _success(record: Mapping[str, Any]) -> bool:
    detail = (record.get("final") or {}).get("reward_detail") or {}
    return detail.get("r_success") == 1


def _strict(record: Mapping[str, Any]) -> float:
    detail = (record.get("final") or {}).get("reward_detail") or {}
    value = detail.get("r_strict")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def episode_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of what an episode did and got (no ids, seeds or timings)."""
    body = {key: record.get(key) for key in ("reset", "conversation", "final")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _std(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that k repeats drawn without replacement from n (c successes) all succeed."""
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k repeats drawn from n (c successes) succeeds."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def repeat_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The repeat figures of completed episodes (None when no task has two repeats).

    Only tasks with the same number n of completed repeats as the most complete task are counted, so pass^k
    never mixes denominators; ``tasks_left_out`` counts the others (unfinished or failed repeats).
    """
    by_task: dict[int, dict[int, Mapping[str, Any]]] = defaultdict(dict)
    for record in records:
        job = record.get("job") or {}
        by_task[int(job["task_id"])][int(job["sample_id"])] = record
    if not by_task:
        return None
    n = max(len(samples) for samples in by_task.values())
    if n < 2:
        return None
    full = {task: samples for task, samples in sorted(by_task.items()) if len(samples) == n}
    counts = {task: sum(_success(r) for r in samples.values()) for task, samples in full.items()}
    sample_ids = sorted({s for samples in full.values() for s in samples})
    per_repeat_success: list[float] = []
    per_repeat_reward: list[float] = []
    for sample in sample_ids:
        chosen = [samples[sample] for samples in full.values() if sample in samples]
        per_repeat_success.append(sum(_success(r) for r in chosen) / len(chosen))
        per_repeat_reward.append(sum(_strict(r) for r in chosen) / len(chosen))
    identical = all(len({episode_digest(r) for r in samples.values()}) == 1 for samples in full.values())
    tasks = len(full)
    return {
        "repeats": n, "tasks": tasks, "tasks_left_out": len(by_task) - tasks,
        "per_repeat": {"success_rate": per_repeat_success, "reward_mean": per_repeat_reward},
        "success_rate_mean": sum(per_repeat_success) / len(per_repeat_success),
        "success_rate_std": _std(per_repeat_success),
        "reward_mean_mean": sum(per_repeat_reward) / len(per_repeat_reward),
        "reward_mean_std": _std(per_repeat_reward),
        "pass_hat_k": {str(k): sum(pass_hat_k(n, c, k) for c in counts.values()) / tasks for k in range(1, n + 1)},
        "pass_at_k": {str(k): sum(pass_at_k(n, c, k) for c in counts.values()) / tasks for k in range(1, n + 1)},
        "flip_rate": sum(1 for c in counts.values() if 0 < c < n) / tasks,
        "identical": identical,
    }
