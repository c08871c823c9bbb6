"""The report's version-stamp lines and interval tables (summary ``stamps`` and ``intervals``, eval/clusters.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..stamps import STAMP_KEYS

CLUSTER_TITLES = {"episode": "episodes", "leaf_category": "leaf categories", "persona_group": "persona groups"}


def stamps_markdown(stamps: Mapping[str, Any] | None) -> list[str]:
    if not stamps:
        return []
    return ["- version stamps: " + " · ".join(f"{key} `{stamps.get(key)}`" for key in STAMP_KEYS)]


def intervals_markdown(intervals: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """One row per metric and resampling unit: mean, 95% interval, clusters."""
    if not intervals:
        return []
    lines = ["## Bootstrap intervals", "",
             "95% percentile bootstrap, 10,000 resamples, over episodes (plain) and over whole clusters (leaf "
             "category; linked persona group for persona tasks): the clustered interval is the honest one when "
             "tasks of one cluster succeed or fail together.", "",
             "| metric | resampled unit | clusters | mean | 95% CI |", "|---|---|---|---|---|"]
    for metric, rows in intervals.items():
        for unit, row in rows.items():
            lines.append(f"| {metric} | {CLUSTER_TITLES.get(unit, unit)} | {row['clusters']} | {row['mean']:.4f} | "
                         f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}] |")
    return [*lines, ""]


def clustered_cell(metric: Mapping[str, Any], clustering: str = "leaf_category", scale: float = 1.0) -> str:
    """``[low, high]`` of a compared metric's clustered interval, or ``—`` when the catalog could not label it."""
    row = (metric.get("clustered") or {}).get(clustering)
    if not row:
        return "—"
    return f"[{row['ci_low'] * scale:+.4f}, {row['ci_high'] * scale:+.4f}]"


def fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.2f}%" if pct else f"{value:.4f}"


def spread(values: list[float]) -> float | None:
    return max(values) - min(values) if values else None


def repeats_markdown(repeats: Mapping[str, Any] | None) -> list[str]:
    """``--repeats K``: spread over repeats, pass^k / pass@k for every k, the flip rate."""
    if not repeats:
        return []
    k = repeats["repeats"]
    lines = ["## Repeats", "",
             f"{k} repeats of each of {repeats['tasks']} tasks (distinct sampling seeds)"
             + (f"; {repeats['tasks_left_out']} tasks without {k} completed repeats left out" if repeats[
                 "tasks_left_out"] else "") + ".", ""]
    source = repeats.get("noise_source")
    if source == "shopper":
        lines += ["> The agent is a built-in (deterministic) policy: this spread is the LLM shopper's own noise "
                  "(the same agent, a different shopper seed per repeat).", ""]
    elif source == "agent+shopper":
        lines += ["> Both the model and the LLM shopper sample: this spread mixes their noise; run a built-in "
                  "dialogue policy against the same shopper to see the shopper's share.", ""]
    if repeats["identical"]:
        lines += ["> note: the repeats are byte-identical episodes (this policy and shopper ignore the sampling "
                  "seed): a spread of zero and a flip rate of zero are by construction, not a measured noise floor.",
                  ""]
    lines += ["| figure | value |", "|---|---|",
              f"| success rate, mean ± std over repeats | {fmt(repeats['success_rate_mean'], True)} ± "
              f"{fmt(repeats['success_rate_std'] or 0.0, True)} |",
              f"| r_strict, mean ± std over repeats | {fmt(repeats['reward_mean_mean'])} ± "
              f"{fmt(repeats['reward_mean_std'] or 0.0)} |",
              f"| r_strict per seed (repeat 0, 1, …) | {', '.join(fmt(v) for v in repeats['per_repeat']['reward_mean'])} |",
              f"| success rate per seed | {', '.join(fmt(v, True) for v in repeats['per_repeat']['success_rate'])} |",
              f"| spread of the per-seed r_strict (max − min) | {fmt(spread(repeats['per_repeat']['reward_mean']))} |",
              f"| flip rate (tasks whose success differs between repeats) | {fmt(repeats['flip_rate'], True)} |",
              "", "| k | pass^k | pass@k |", "|---|---|---|",
              *[f"| {n} | {fmt(repeats['pass_hat_k'][n], True)} | {fmt(repeats['pass_at_k'][n], True)} |"
                for n in repeats["pass_hat_k"]], ""]
    return lines
