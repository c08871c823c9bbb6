"""GRPO groups (docs/contract.md#grpo): n siblings per task sharing one context, the dynamic-sampling filter and the
per-group advantage over unique rollouts.

**The unscored-sibling rule** (written here once; every adapter cites it): a group with any unscored sibling (an
aborted or failed episode) is dropped whole — none of its rows gets an advantage. A trainer that can remove
groups removes it (slime's dynamic-sampling filter, :func:`group_decision`); one that cannot gives every row of
it advantage 0, so nothing of it moves the policy (verl's registered ``shopsim_grpo`` estimator and TRL's
``None`` rewards both go through :func:`drop_unscored_groups`). An unscored row never enters a mean or a std.

A rollout (one episode) may fan out into several segments; every rule here counts a rollout once, by its
``rollout_id``, so long episodes are not over-weighted: the spread test and the advantage are taken over one
reward per rollout and the advantage is broadcast to all of its segments.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent.episode import EpisodeStats
from ..agent.episode_env import EnvironmentFactory
from ..errors import RolloutError
from .rollout import (
    ChatTokenizer,
    GenerateFn,
    RolloutConfig,
    RolloutContext,
    Trajectory,
    run_rollout,
)

DEFAULT_GROUP_SIZE = 8
ZERO_SPREAD_EPS = 1e-6
STD_EPS = 1e-6
KEEP, DROP_UNSCORED, DROP_ZERO_SPREAD = "keep", "shopsim_unscored_technical_group", "shopsim_zero_std_group"
MAX_CONSECUTIVE_UNSCORED = 8


@dataclass
class Group:
    """The n rollouts of one task under one shared context."""

    group_index: int
    context: RolloutContext
    trajectories: list[Trajectory] = field(default_factory=list)

    def rollout_rewards(self) -> dict[Hashable, float]:
        return unique_rewards((t.metadata.get("rollout_id", i), t.reward) for i, t in enumerate(self.trajectories))

    @property
    def all_scored(self) -> bool:
        return all(t.scored for t in self.trajectories)


def unique_rewards(pairs: Iterable[tuple[Hashable, float]]) -> dict[Hashable, float]:
    """One reward per rollout id (segments of one rollout must carry the same reward)."""
    out: dict[Hashable, float] = {}
    for rollout_id, reward in pairs:
        reward = float(reward)
        if rollout_id in out and abs(out[rollout_id] - reward) > 0.0:
            raise RolloutError(f"segments of rollout {rollout_id!r} disagree on the reward", code="group")
        out[rollout_id] = reward
    return out


def drop_unscored_groups(rewards: Sequence[float | None], group_ids: Sequence[Hashable]) -> list[float | None]:
    """The unscored-sibling rule on a flat batch: every row of a group holding a ``None`` reward becomes ``None``.

    ``None`` marks an unscored row; the result marks every row whose group is dropped.
    """
    if len(rewards) != len(group_ids):
        raise RolloutError("one group id per reward", code="group")
    dropped = {gid for gid, reward in zip(group_ids, rewards, strict=True) if reward is None}
    return [None if gid in dropped else reward for gid, reward in zip(group_ids, rewards, strict=True)]


def flat_advantages(rewards: Sequence[float | None], group_ids: Sequence[Hashable], *,
                    std_normalization: bool = True, eps: float = STD_EPS) -> list[float]:
    """Per-row GRPO advantages for a flat batch of one-row rollouts, the unscored-sibling rule applied first:
    a dropped group's rows get 0, every other group gets :func:`group_advantages` over its rows."""
    kept = drop_unscored_groups(rewards, group_ids)
    per_group: dict[Hashable, dict[Hashable, float]] = {}
    for row, (gid, reward) in enumerate(zip(group_ids, kept, strict=True)):
        if reward is not None:
            per_group.setdefault(gid, {})[row] = float(reward)
    out = [0.0] * len(kept)
    for members in per_group.values():
        for key, value in group_advantages(members, std_normalization=std_normalization, eps=eps).items():
            out[int(key)] = value  # type: ignore[call-overload]  # the keys are the row numbers set above
    return out


def is_zero_spread(rewards: Iterable[float], eps: float = ZERO_SPREAD_EPS) -> bool:
    values = list(rewards)
    return not values or max(values) - min(values) <= eps


def group_decision(scored: Sequence[bool], rewards: Mapping[Hashable, float]) -> str:
    """The filter's verdict for one finished group: any unscored sibling drops it; zero spread is droppable."""
    if not all(scored):
        return DROP_UNSCORED
    if is_zero_spread(rewards.values()):
        return DROP_ZERO_SPREAD
    return KEEP


@dataclass
class Selection:
    kept: list[Any]
    dropped: list[tuple[Any, str]]
    filled_with_zero_spread: int = 0


def select_groups(groups: Sequence[Any], decisions: Sequence[str], target: int) -> Selection:
    """Dynamic sampling over an over-sampled wave, in completion order.

    Informative groups are kept until ``target``; zero-spread groups are dropped unless the batch would run
    short (``keep_when_insufficient``), then the earliest of them fill it; unscored groups are never kept.
    """
    if len(groups) != len(decisions):
        raise RolloutError("one decision per group", code="group")
    kept: list[Any] = []
    dropped: list[tuple[Any, str]] = []
    spare: list[Any] = []
    for group, decision in zip(groups, decisions, strict=True):
        if decision == KEEP and len(kept) < target:
            kept.append(group)
        elif decision == DROP_ZERO_SPREAD:
            spare.append(group)
        else:
            dropped.append((group, decision if decision != KEEP else "surplus"))
    fill = spare[: max(0, target - len(kept))]
    kept.extend(fill)
    dropped.extend((group, DROP_ZERO_SPREAD) for group in spare[len(fill):])
    return Selection(kept=kept, dropped=dropped, filled_with_zero_spread=len(fill))


class UnscoredStreak:
    """Aborts training after ``limit`` consecutive groups dropped for technical failures."""

    def __init__(self, limit: int = MAX_CONSECUTIVE_UNSCORED) -> None:
        self.limit = limit
        self.count = 0

    def update(self, decision: str) -> None:
        self.count = self.count + 1 if decision == DROP_UNSCORED else 0
        if self.count >= self.limit:
            raise RolloutError(f"{self.count} consecutive groups had an unscored rollout: the environment or the "
                             "inference engine is failing", code="group")


def group_advantages(rewards: Mapping[Hashable, float], *, std_normalization: bool = True,
                     eps: float = STD_EPS) -> dict[Hashable, float]:
    """GRPO advantage per rollout: reward − group mean, divided by (unbiased std + eps) when normalising."""
    if not rewards:
        return {}
    values = list(rewards.values())
    mean = sum(values) / len(values)
    centred = {key: value - mean for key, value in rewards.items()}
    if std_normalization and len(values) > 1:
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        return {key: value / (std + eps) for key, value in centred.items()}
    return centred


def segment_advantages(rollout_ids: Sequence[Hashable], rewards: Sequence[float], group_ids: Sequence[Hashable],
                       *, std_normalization: bool = True) -> list[float]:
    """Advantages for a flat list of segments (slime's reward post-process): per group over unique rollouts,
    broadcast back to each segment."""
    if not (len(rollout_ids) == len(rewards) == len(group_ids)):
        raise RolloutError("rollout_ids, rewards and group_ids must have one entry per segment", code="group")
    per_group: dict[Hashable, list[tuple[Hashable, float]]] = {}
    for rid, reward, gid in zip(rollout_ids, rewards, group_ids, strict=True):
        per_group.setdefault(gid, []).append((rid, reward))
    advantage: dict[tuple[Hashable, Hashable], float] = {}
    for gid, pairs in per_group.items():
        for rid, value in group_advantages(unique_rewards(pairs), std_normalization=std_normalization).items():
            advantage[(gid, rid)] = value
    return [advantage[(gid, rid)] for rid, gid in zip(rollout_ids, group_ids, strict=True)]


def check_shared_context(contexts: Iterable[RolloutContext]) -> RolloutContext:
    """All siblings of a group must see one context (same task, persona, prompt and skill subset)."""
    items = list(contexts)
    if not items:
        raise RolloutError("a group needs at least one rollout", code="group")
    first = items[0].fingerprint()
    if any(c.fingerprint() != first for c in items[1:]):
        raise RolloutError("siblings of a group have different contexts (task, persona, prompt or skills)", code="group")
    return items[0]


async def run_group(
    context: RolloutContext, tokenizer: ChatTokenizer, generate: GenerateFn, environment: EnvironmentFactory, *,
    n: int = DEFAULT_GROUP_SIZE, group_index: int = 0, first_rollout_id: int = 0,
    config: RolloutConfig | None = None, semaphore: asyncio.Semaphore | None = None,
    timer: EpisodeStats | None = None,
) -> Group:
    """n siblings of one task under one context, run concurrently (bounded by ``semaphore``)."""
    if n < 1:
        raise RolloutError("group size must be at least 1", code="group")

    async def one(i: int) -> Trajectory:
        meta = {"group_index": group_index, "rollout_id": first_rollout_id + i}
        if semaphore is None:
            return await run_rollout(context, tokenizer, generate, environment, config=config, metadata=meta,
                                     timer=timer)
        async with semaphore:
            return await run_rollout(context, tokenizer, generate, environment, config=config, metadata=meta,
                                     timer=timer)

    trajectories = await asyncio.gather(*(one(i) for i in range(n)))
    return Group(group_index=group_index, context=context, trajectories=list(trajectories))


def advantages_for(group: Group, *, std_normalization: bool = True) -> list[float]:
    """One advantage per trajectory of ``group`` (by rollout id)."""
    adv = group_advantages(group.rollout_rewards(), std_normalization=std_normalization)
    return [adv[t.metadata.get("rollout_id", i)] for i, t in enumerate(group.trajectories)]


def decide(group: Group) -> str:
    return group_decision([t.scored for t in group.trajectories], group.rollout_rewards())


@dataclass
class RolloutStep:
    """One rollout step's outcome: kept groups and their per-trajectory advantages, plus drop reasons."""

    groups: list[Group]
    advantages: list[list[float]]
    dropped: list[tuple[int, str]]
    filled_with_zero_spread: int


async def rollout_step(
    contexts: Sequence[RolloutContext], tokenizer: ChatTokenizer, generate: GenerateFn,
    environment: EnvironmentFactory, *, target_groups: int, n: int = DEFAULT_GROUP_SIZE,
    config: RolloutConfig | None = None, concurrency: int = 32, std_normalization: bool = True,
    timer: EpisodeStats | None = None,
) -> RolloutStep:
    """Run one group per context (the over-sampled wave), filter, select ``target_groups`` and score them."""
    semaphore = asyncio.Semaphore(concurrency)
    groups = await asyncio.gather(*(
        run_group(ctx, tokenizer, generate, environment, n=n, group_index=i, first_rollout_id=i * n,
                  config=config, semaphore=semaphore, timer=timer)
        for i, ctx in enumerate(contexts)
    ))
    decisions = [decide(g) for g in groups]
    selection = select_groups(groups, decisions, target_groups)
    return RolloutStep(
        groups=selection.kept,
        advantages=[advantages_for(g, std_normalization=std_normalization) for g in selection.kept],
        dropped=[(g.group_index, reason) for g, reason in selection.dropped],
        filled_with_zero_spread=selection.filled_with_zero_spread,
    )
