"""``summary.json`` (docs/contract.md#summary): coverage, reward, behaviour and cost of a run, from its traces alone.

Only *completed* episodes (right schema, ``status == "completed"``, terminal ``final``) are scored; failed ones
are counted and their error types tallied. ``reward_mean`` is the mean ``r_strict`` with its standard error
(sample SD / √n); rates are per model step (protocol errors, policy failures) or per environment action
(invalid actions).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .dialogue_metrics import dialogue_summary
from .repeats import repeat_summary
from .rundir import is_completed
from .taxonomy import failure_taxonomy

SUMMARY_SCHEMA = "shopsimrl-eval-summary-v2"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _sem(values: list[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


def _error_kind(error: dict[str, Any]) -> str:
    """A failure's kind in the summary: ``Class(code)`` for a ShopSimError, the exception's class otherwise."""
    kind, code = str(error.get("type", "unknown")), error.get("code")
    return f"{kind}({code})" if isinstance(code, str) else kind


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def reward_detail(record: Mapping[str, Any]) -> dict[str, Any]:
    final = record.get("final") or {}
    detail = final.get("reward_detail")
    return detail if isinstance(detail, dict) else {}


def step_counts(record: Mapping[str, Any]) -> dict[str, int]:
    """Per-episode behaviour counts (shared by the summary and the paired comparison)."""
    steps = record.get("steps") or []
    protocol = sum(1 for s in steps if s.get("protocol_error"))
    policy = sum(1 for s in steps if s.get("policy_failure"))
    actions = [s for s in steps if isinstance(s.get("environment"), dict)]
    invalid = sum(1 for s in actions if (s["environment"].get("action_feedback") or {}).get("valid") is False)
    tokens: Counter[str] = Counter()
    for s in steps:
        usage = (s.get("model") or {}).get("usage") or {}
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if _number(usage.get(key)):
                tokens[key] += int(usage[key])
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict) and _number(details.get("reasoning_tokens")):
            tokens["reasoning_tokens"] += int(details["reasoning_tokens"])
    return {"steps": len(steps), "protocol_errors": protocol, "policy_failures": policy,
            "actions": len(actions), "invalid_actions": invalid, **tokens}


def tier_summary(records: Iterable[Mapping[str, Any]], tiers: Mapping[int, str]) -> dict[str, Any]:
    """Completed episodes, success rate and mean r_strict per difficulty tier (tiers with episodes only)."""
    from ..catalog.tiers import TIERS

    by: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if is_completed(record):
            by.setdefault(tiers.get(int(record["job"]["task_id"]), "unlabelled"), []).append(record)
    out = {}
    for tier in (*TIERS, "unlabelled"):
        if tier in by:
            details = [reward_detail(r) for r in by[tier]]
            out[tier] = {"episodes": len(details),
                         "success_rate": _mean([float(d.get("r_success") or 0) for d in details]),
                         "reward_mean": _mean([float(d.get("r_strict") or 0.0) for d in details])}
    return out


def summarize(
    records: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]], *, requested: int | None = None,
    episode_ids: Iterable[str] | None = None, meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Summarise the latest record of each episode (restricted to ``episode_ids`` when given)."""
    latest = dict(records) if isinstance(records, Mapping) else {r["episode_id"]: r for r in records}
    if episode_ids is not None:
        wanted = list(episode_ids)
        latest = {eid: latest[eid] for eid in wanted if eid in latest}
        requested = len(wanted) if requested is None else requested
    requested = len(latest) if requested is None else requested
    completed = [r for r in latest.values() if is_completed(r)]
    failed = [r for r in latest.values() if not is_completed(r)]
    details = [reward_detail(r) for r in completed]
    strict = [float(d["r_strict"]) for d in details if _number(d.get("r_strict"))]
    success = [float(d["r_success"]) for d in details if _number(d.get("r_success"))]
    component_keys = sorted({k for d in details for k, v in d.items() if k.startswith("r_") and _number(v)})
    components = {k: _mean([float(d[k]) for d in details if _number(d.get(k))]) for k in component_keys}
    counts = [step_counts(r) for r in completed]
    model_steps = sum(c["steps"] for c in counts)
    protocol = sum(c["protocol_errors"] for c in counts)
    policy = sum(c["policy_failures"] for c in counts)
    actions = sum(c["actions"] for c in counts)
    invalid = sum(c["invalid_actions"] for c in counts)
    terminations = Counter(str((r.get("final") or {}).get("termination_reason")) for r in completed)
    tokens = {key: sum(c.get(key, 0) for c in counts)
              for key in ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens")}
    durations = [float(r["duration_ms"]) for r in completed if _number(r.get("duration_ms"))]
    errors = Counter(_error_kind(r.get("error") or {}) for r in failed)
    summary: dict[str, Any] = {
        "schema_version": SUMMARY_SCHEMA,
        "counts": {"requested": requested, "trace_files": len(latest), "completed": len(completed),
                   "failed": len(failed), "scored": len(strict), "coverage": _rate(len(completed), requested)},
        "primary": {"reward_mean": _mean(strict), "reward_sem": _sem(strict), "success_rate": _mean(success)},
        "reward_components": components,
        "behavior": {
            "steps_mean": _mean([float(c["steps"]) for c in counts]), "model_steps": model_steps,
            "protocol_errors": protocol, "protocol_error_rate": _rate(protocol, model_steps),
            "policy_failures": policy, "policy_failure_rate": _rate(policy, model_steps),
            "invalid_actions": invalid, "total_actions": actions, "invalid_action_rate": _rate(invalid, actions),
            "termination_reasons": dict(sorted(terminations.items())),
        },
        "cost": {"duration_ms_mean": _mean(durations), "tokens": tokens,
                 "completion_tokens_per_step": _rate(tokens["completion_tokens"], model_steps)},
        "errors": dict(sorted(errors.items())),
    }
    dialogue = dialogue_summary(completed)
    if dialogue is not None:  # dialogue runs only
        summary["dialogue"] = dialogue
    summary["failure_taxonomy"] = failure_taxonomy([*completed, *failed])
    repeats = repeat_summary(completed)
    if repeats is not None:  # runs with --repeats K > 1 only
        summary["repeats"] = repeats
    if meta:
        summary["run"] = dict(meta)
    return summary
