"""Train the ``learned`` policy by reinforcement learning alone: policy gradient with a group baseline.

The learner plays whole episodes through the public environment (``ShopEnv`` and the one episode loop, the same
:class:`~shopsimrl.agent.policy.PolicyContext` every agent sees), sampling each choice from the linear softmax of
:mod:`shopsimrl.agent.policies.learned`. The only learning signal is the episode's scalar reward (``r_strict``)
at the end. Episodes come in GRPO-style groups of the same task; an episode's advantage is its reward minus its
group's mean, groups whose rewards are all equal teach nothing and are skipped (and counted), and one Adam step
follows each batch of groups. Tasks are drawn from the persona train split only (asserted at every reset); no
policy is imitated and nothing of the private goal is read. Greedy evaluations on held-out tasks give the
learning curve; they never feed the update.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..agent.episode import EpisodeRequest
from ..agent.play import play, play_episode
from ..agent.policies.learned import LearnedPolicy, LinearModel, catalog_stamp, fallback, zero_weights
from ..agent.policies.learned_features import FEATURES, KINDS, Decision, decide
from ..agent.policy import PolicyAction, PolicyContext
from ..env.shop_env import ShopEnv, ShopWorld
from ..errors import ConfigError
from ..stamps import generator_version

TRAIN_SPLIT = "train"

# Feature groups for the ablation: each names the features it switches off (by name prefix or exact name).
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "query": tuple(name for name in FEATURES["search"]),
    "lexical": ("item:request_cover", "item:is_best_cover", "item:leaf", "value:in_request", "value:request_cover",
                "value:parts", "value:axis_in_request", "buy:request_cover", "buy:leaf", "prev:request_cover",
                "item:accessory_word", "item:attribute_chars", "buy:attributes", "buy:attribute_chars"),
    "persona": ("item:evidence", "item:preference", "item:brand", "item:in_persona", "value:evidence",
                "value:size_word", "value:preference", "item:leaf_in_evidence", "item:attributes_in_evidence",
                "buy:evidence"),
    "budget": ("item:has_budget", "item:over_budget", "item:fits_budget", "item:log_price", "buy:fits_budget",
               "buy:over_budget", "buy:no_budget", "prev:over_budget"),
    "position": ("item:1/rank", "item:rank<=3", "value:first", "value:last", "value:position"),
}


@dataclass(frozen=True)
class PolicyTrainConfig:
    """Every knob of a run; the defaults are the shipped weights' recipe."""

    episodes: int = 100_000  # training episodes in all (groups × group size)
    group_size: int = 8  # episodes per task per group (the baseline is the group's mean reward)
    groups_per_update: int = 16  # groups per Adam step
    lr: float = 0.05
    lr_final: float = 0.1  # the learning rate decays linearly to lr × lr_final at the last update
    init_scale: float = 0.01  # standard deviation of the random initial weights
    seed: int = 0
    eval_every: int = 10_000  # training episodes between greedy evaluations on the eval split
    eval_split: str = "val"
    eval_tasks: int | None = None  # None: the whole eval split
    ablate: tuple[str, ...] = ()  # feature groups switched off (FEATURE_GROUPS)

    def check(self) -> None:
        if self.group_size < 2 or self.groups_per_update < 1 or self.episodes < self.group_size:
            raise ConfigError("need group_size >= 2, groups_per_update >= 1 and episodes >= group_size", code="recipe")
        if self.lr < 0 or self.init_scale < 0 or self.eval_every < 0 or not 0 <= self.lr_final <= 1:
            raise ConfigError("lr, init_scale and eval_every must be >= 0 and lr_final within [0, 1]", code="recipe")
        unknown = sorted(set(self.ablate) - set(FEATURE_GROUPS))
        if unknown:
            raise ConfigError(f"unknown feature group(s) {unknown}; choose from {', '.join(FEATURE_GROUPS)}", code="recipe")


def feature_mask(ablate: Sequence[str]) -> dict[str, np.ndarray]:
    """1 for every feature the run may use, 0 for the ablated groups' features."""
    prefixes = tuple(prefix for group in ablate for prefix in FEATURE_GROUPS[group])
    return {kind: np.array([0.0 if name.startswith(prefixes) and prefixes else 1.0 for name in FEATURES[kind]])
            for kind in KINDS}


@dataclass
class Step:
    """One sampled choice: what was decided, which candidate, with which probabilities."""

    decision: Decision
    index: int
    probabilities: np.ndarray


class SamplingPolicy:
    """The training-time policy: samples each choice from the softmax and records it (seeded generator)."""

    name = "learned-sampling"

    def __init__(self, model: LinearModel, rng: np.random.Generator) -> None:
        self.model, self.rng = model, rng
        self.steps: list[Step] = []

    def act(self, context: PolicyContext) -> PolicyAction:
        decision = decide(context)
        if decision is None:
            return fallback(context)
        probabilities = self.model.probabilities(decision)
        index = int(self.rng.choice(len(probabilities), p=probabilities))
        self.steps.append(Step(decision, index, probabilities))
        return decision.actions[index]


class Adam:
    """Adam over the per-kind weight vectors (ascent on the policy-gradient objective)."""

    def __init__(self, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t = 0

    def step(self, weights: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        self.t += 1
        for kind, grad in grads.items():
            m = self.m[kind] = self.beta1 * self.m.get(kind, np.zeros_like(grad)) + (1 - self.beta1) * grad
            v = self.v[kind] = self.beta2 * self.v.get(kind, np.zeros_like(grad)) + (1 - self.beta2) * grad * grad
            m_hat, v_hat = m / (1 - self.beta1**self.t), v / (1 - self.beta2**self.t)
            weights[kind] = weights[kind] + self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def add_gradient(grads: dict[str, np.ndarray], steps: Sequence[Step], advantage: float) -> None:
    """``advantage`` × the episode's ∇ log π: for each choice, its features minus the expected features."""
    for step in steps:
        features = np.asarray(step.decision.features, dtype=np.float64)
        grads[step.decision.kind] += advantage * (features[step.index] - step.probabilities @ features)


@dataclass
class EvalPoint:
    episodes: int
    success: float
    r_strict: float


@dataclass
class TrainResult:
    model: LinearModel
    curve: list[EvalPoint] = field(default_factory=list)
    updates: list[dict[str, float]] = field(default_factory=list)
    groups_sampled: int = 0
    groups_skipped: int = 0  # zero reward spread: no gradient
    wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"curve": [asdict(point) for point in self.curve], "groups_sampled": self.groups_sampled,
                "groups_skipped": self.groups_skipped, "wall_s": round(self.wall_s, 1)}


class TrainTaskEnv(ShopEnv):
    """The learner's environment: a ``ShopEnv`` that refuses any reset outside the train split or with the goal."""

    def __init__(self, world: ShopWorld) -> None:
        super().__init__(world)
        self.allowed = frozenset(world.catalog.split(TRAIN_SPLIT))
        self.resets: list[int] = []

    def reset(self, task_id: int, *args: Any, **kwargs: Any) -> Any:
        if task_id not in self.allowed:
            raise ConfigError(f"task {task_id} is not a {TRAIN_SPLIT} task: the learner never sees it", code="recipe")
        if kwargs.get("include_private_goal"):
            raise ConfigError("the learner never reads the private goal", code="recipe")
        self.resets.append(task_id)
        return super().reset(task_id, *args, **kwargs)


def evaluate(world: ShopWorld, model: LinearModel, task_ids: Sequence[int]) -> EvalPoint:
    """Greedy success rate and mean ``r_strict`` of ``model`` on ``task_ids`` (measurement only)."""
    env, policy = ShopEnv(world), LearnedPolicy(model=model)
    outcomes = [play_episode(env, policy, task_id) for task_id in task_ids]
    return EvalPoint(0, float(np.mean([o.success for o in outcomes])), float(np.mean([o.reward for o in outcomes])))


def train(world: ShopWorld, config: PolicyTrainConfig, *, say: Callable[[str], None] | None = None,
          env: TrainTaskEnv | None = None) -> TrainResult:
    """Train from random initialisation; the result holds the weights, the learning curve and group counts."""
    config.check()
    started = time.perf_counter()
    init_seed, sample_seed, task_seed = np.random.SeedSequence(config.seed).spawn(3)
    model = LinearModel.initial(np.random.default_rng(init_seed), config.init_scale)
    mask = feature_mask(config.ablate)
    model.weights = {name: model.weights[name] * mask[name] for name in model.weights}
    sampler, tasks_rng = np.random.default_rng(sample_seed), np.random.default_rng(task_seed)
    env = env or TrainTaskEnv(world)
    train_ids = world.catalog.split(TRAIN_SPLIT)
    eval_ids = list(world.catalog.split(config.eval_split))[: config.eval_tasks]
    optimizer, result = Adam(config.lr), TrainResult(model)
    played = next_eval = 0

    def checkpoint() -> None:
        point = replace(evaluate(world, model, eval_ids), episodes=played)
        result.curve.append(point)
        if say:
            say(f"[train policy] {played:>7} episodes  {config.eval_split} success {point.success:.4f}  "
                f"r_strict {point.r_strict:.4f}  ({time.perf_counter() - started:.0f} s)")

    while played < config.episodes:
        if config.eval_every and played >= next_eval:
            checkpoint()
            next_eval += config.eval_every
        grads = zero_weights()
        rewards_seen: list[float] = []
        for _ in range(config.groups_per_update):
            if played >= config.episodes:
                break
            task_id = int(train_ids[int(tasks_rng.integers(len(train_ids)))])
            group = []
            for _ in range(config.group_size):
                policy = SamplingPolicy(model, sampler)
                episode, _ = play(env, policy, EpisodeRequest(task_id))
                assert episode.final is not None
                group.append((float(episode.final.get("reward", 0.0)), policy.steps))
            played += config.group_size
            result.groups_sampled += 1
            rewards = np.array([reward for reward, _ in group])
            rewards_seen.extend(rewards.tolist())
            if rewards.max() == rewards.min():
                result.groups_skipped += 1
                continue
            baseline = rewards.mean()
            for reward, steps in group:
                add_gradient(grads, steps, (reward - baseline) / config.group_size)
        grads = {name: grads[name] * mask[name] for name in grads}
        optimizer.lr = config.lr * (1.0 - (1.0 - config.lr_final) * min(played / config.episodes, 1.0))
        optimizer.step(model.weights, grads)
        result.updates.append({"episodes": played, "mean_reward": float(np.mean(rewards_seen))})
    if config.eval_every:
        checkpoint()
    result.wall_s = time.perf_counter() - started
    model.meta = {"catalog": {**catalog_stamp(world), "generator_version": generator_version(world.catalog.root, world.catalog.manifest)},
                  "training": {**asdict(config), "ablate": list(config.ablate), "groups_sampled": result.groups_sampled,
                               "groups_skipped": result.groups_skipped, "algorithm": "policy gradient, group baseline"}}
    return result


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


__all__ = ["FEATURE_GROUPS", "PolicyTrainConfig", "SamplingPolicy", "TrainResult",
           "TrainTaskEnv", "evaluate", "feature_mask", "train"]
