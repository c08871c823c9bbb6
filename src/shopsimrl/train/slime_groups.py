"""slime's group filter and reward post-process for ShopSimRL episodes (re-exported by
:mod:`shopsimrl.train.slime`, whose dotted paths the launch flags name).

Both apply the group rules of :mod:`shopsimrl.train.groups`: a group with any unscored sibling is dropped, a
zero-spread group too (kept by slime only when the batch would run short), and advantages are computed per group
over unique rollouts and broadcast to each rollout's segments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .groups import DROP_ZERO_SPREAD, KEEP, group_decision, segment_advantages, unique_rewards
from .health import batch_health


def _flatten(samples: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for s in samples:
        out.extend(_flatten(s) if isinstance(s, (list, tuple)) else [s])
    return out


def _scored(s: Any) -> bool:
    meta = getattr(s, "metadata", None) or {}
    reward = (s.reward or {}).get("reward") if isinstance(s.reward, Mapping) else s.reward
    return bool(meta.get("shopsim_scored", True)) and isinstance(reward, (int, float)) and math.isfinite(reward)


def _rollout_id(s: Any) -> Any:
    rollout_id = getattr(s, "rollout_id", None)
    if rollout_id is not None:
        return rollout_id
    return (getattr(s, "metadata", None) or {}).get("rollout_id", s.index)


def _reward(s: Any) -> float:
    return float(s.reward["reward"] if isinstance(s.reward, Mapping) else s.reward)


@dataclass
class FilterOutput:
    """Same fields as slime's ``DynamicFilterOutput`` (used when slime is not importable)."""

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


def fully_scored_group_filter(args: Any, samples: Sequence[Any], **kwargs: Any) -> Any:
    """Drop a group with any unscored sibling; a group with zero reward spread over unique rollouts is dropped
    too, but marked ``keep_when_insufficient`` so that slime keeps it when the batch would run short (docs/contract.md#grpo)."""
    flat = _flatten(samples)
    scored = [_scored(s) for s in flat]
    rewards = unique_rewards((_rollout_id(s), _reward(s)) for s, ok in zip(flat, scored, strict=True) if ok)
    decision = group_decision(scored, rewards)
    try:
        from slime.rollout.filter_hub.base_types import DynamicFilterOutput as Output
    except ImportError:
        Output = FilterOutput
    return Output(keep=decision == KEEP, reason=None if decision == KEEP else decision,
                  keep_when_insufficient=decision == DROP_ZERO_SPREAD)


def _turn_counts(flat: Sequence[Any]) -> list[tuple[int, int]]:
    seen: dict[Any, tuple[int, int]] = {}
    for s in flat:  # one count per rollout (segments share their episode's metadata)
        meta = getattr(s, "metadata", None) or {}
        seen[_rollout_id(s)] = (int(meta.get("shopsim_turns", 0)), int(meta.get("shopsim_protocol_errors", 0)))
    return list(seen.values())


def log_rollout_health(rollout_id: Any, args: Any, samples: Sequence[Any], rollout_extra_metrics: Any,
                       rollout_time: float) -> bool:
    """slime's ``--custom-rollout-log-function-path``: adds ``shop/protocol_error_rate`` and
    ``shop/protocol_error_alarm`` to the rollout step's metrics and lets slime's default logging go on (returns
    False), which logs them with its own ``rollout/`` metrics. slime hands ``rollout_extra_metrics`` as None when
    the rollout function returned none; the health then goes out through slime's logger on its own, at the same
    ``rollout/step``."""
    health = batch_health(_turn_counts(_flatten(samples)), "slime rollout")
    if isinstance(rollout_extra_metrics, dict):
        rollout_extra_metrics.update(health)
        return False
    try:
        from slime.observability import logging_utils
        from slime.observability.metric_utils import compute_rollout_step
    except ImportError:
        return False
    logging_utils.log(args, {**health, "rollout/step": compute_rollout_step(args, rollout_id)}, step_key="rollout/step")
    return False


def normalize_grpo_by_prompt_and_rollout(args: Any, samples: Sequence[Any]) -> tuple[list[float], list[float]]:
    """Raw rewards and GRPO advantages per segment: per group over unique rollouts, broadcast to segments."""
    flat = _flatten(samples)
    batch_health(_turn_counts(flat), "slime reward post-process")
    raw = [_reward(s) for s in flat]
    advantages = segment_advantages([_rollout_id(s) for s in flat], raw, [s.group_index for s in flat],
                                    std_normalization=bool(getattr(args, "grpo_std_normalization", True)))
    return raw, advantages
