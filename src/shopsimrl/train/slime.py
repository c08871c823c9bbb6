"""slime adapter (docs/contract.md#grpo): a custom generate function, the group filter and the reward post-process.

Flags (see docs/training.md for a full launch)::

    --custom-generate-function-path shopsimrl.train.slime.generate
    --dynamic-sampling-filter-path shopsimrl.train.slime.fully_scored_group_filter
    --custom-reward-post-process-path shopsimrl.train.slime.normalize_grpo_by_prompt_and_rollout
    --custom-rollout-log-function-path shopsimrl.train.slime.log_rollout_health
    --reward-key reward --n-samples-per-prompt 8 --rollout-top-p 1.0 --rollout-top-k -1

One episode is one rollout: :func:`generate` runs the rollout core (re-segmenting mode) against the shop and
samples exact tokens from the SGLang router's ``/generate``; each segment becomes a ``Sample`` (a copy of the
input sample, so slime's own class is used) with ``loss_mask`` 1 only on sampled tokens, the rollout
log-probs, ``reward = {"reward": r_strict, …}`` and status ``TRUNCATED`` for a ``generation_length`` end, else
``COMPLETED``. An unscored episode is one ``ABORTED`` placeholder with ``remove_sample=True``.

What slime (checked against its source at commit 624b824, the v0.3.1 line) requires of a custom generate:

* it always gets a **list** back (one ``Sample`` per segment): slime flattens the rollout by looking at the
  first element only, so a group mixing a bare ``Sample`` with lists breaks it;
* every ``Sample`` of one episode carries the same ``Sample.rollout_id`` (the input's ``rollout_id``, else its
  ``index``): slime refuses a multi-sample rollout without it and uses it to count a rollout once in the loss;
* the group filter returns ``DynamicFilterOutput``; zero-spread groups are dropped with
  ``keep_when_insufficient=True``, so slime keeps them when the batch would otherwise run short (the
  reference rule); groups with an unscored episode are always dropped (the unscored-sibling rule of
  :mod:`shopsimrl.train.groups`);
* evaluation (slime calls the function with ``evaluation=True``): the same episode, returned as a one-element
  list (the last segment, with the episode's reward), on any split and with any sampling settings.

At scale (slime's ``RolloutManager`` over many groups):

* slime's abort is honoured: once slime sets ``GenerateState.aborted`` (its batch is full) an episode issues no
  further generate call; it comes back as an unscored ``ABORTED`` placeholder at once, so slime's
  ``abort`` does not wait for turns it will throw away;
* concurrency is per group (``shopsim_group_concurrency`` groups in flight per rollout worker, every sibling of
  an admitted group runs at once), so a group is never held back by a global per-episode cap while its siblings
  finish;
* one pooled HTTP client per worker's event loop talks to the SGLang router (not one per turn).

This module imports without slime; slime itself is only needed for the tokenizer (``GenerateState``) and the
filter's return type, and it is imported when used (``pip install slime`` from its repository: slime is not
on PyPI; the ``shopsimrl[train]`` extra covers the rest).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent.episode_env import EnvironmentFactory, InProcessEnvironment, ServiceEnvironment
from ..errors import AdapterError, RolloutError
from .groups import DROP_UNSCORED, DROP_ZERO_SPREAD
from .health import turn_counts
from .rollout import (
    ABORTED,
    DEFAULT_CONTEXT_BUDGET,
    TRUNCATED,
    Generation,
    RolloutConfig,
    RolloutContext,
    Trajectory,
    run_rollout,
)
from .row_codec import TASKS_SCHEMA as TASKS_SCHEMA
from .row_codec import parse_slime_sample, rows_of, slime_line
from .slime_gate import GroupGate
from .slime_groups import (
    FilterOutput,
    fully_scored_group_filter,
    log_rollout_health,
    normalize_grpo_by_prompt_and_rollout,
)
from .step_keys import model_turn_keys
from .template_probe import check_template

INSTALL_HINT = ("slime is not installed: install it from its repository (it is not on PyPI) together with "
                "`pip install 'shopsimrl[train]'`")
DEFAULT_GROUP_CONCURRENCY = 32  # groups in flight per rollout worker: the reference submits 32 groups a step


def _require_slime(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AdapterError(INSTALL_HINT) from exc


@dataclass
class SlimeHooks:
    """Where the adapter gets its tokenizer, generation backend and environment (replaceable for tests)."""

    tokenizer: Callable[[Any], Any] | None = None
    backend: Callable[[Any, Mapping[str, Any]], Callable[[list[int]], Any]] | None = None
    environment: Callable[[Any], EnvironmentFactory] | None = None
    aborted: Callable[[Any], bool] | None = None  # default: slime's GenerateState(args).aborted


HOOKS = SlimeHooks()
_GATES: dict[int, GroupGate] = {}
_CLIENTS: dict[int, Any] = {}
_ENVIRONMENTS: dict[tuple[Any, ...], EnvironmentFactory] = {}


def configure(**hooks: Any) -> None:
    """Replace hooks (``tokenizer``, ``backend``, ``environment``); ``None`` restores the default."""
    for name, value in hooks.items():
        if not hasattr(HOOKS, name):
            raise AdapterError(f"unknown hook {name!r}")
        setattr(HOOKS, name, value)


def _gate(args: Any) -> GroupGate:
    limit = getattr(args, "shopsim_group_concurrency", None)
    if limit is None and getattr(args, "shopsim_episode_concurrency", None) is not None:  # the older key
        per_group = max(1, int(getattr(args, "n_samples_per_prompt", 1) or 1))
        limit = max(1, int(args.shopsim_episode_concurrency) // per_group)
    limit = int(limit if limit is not None else DEFAULT_GROUP_CONCURRENCY)
    return _GATES.setdefault(limit, GroupGate(limit))


def slime_aborted(args: Any) -> bool:
    """slime's own abort flag (``GenerateState(args).aborted``, set by ``abort`` once the batch is full)."""
    if HOOKS.aborted is not None:
        return HOOKS.aborted(args)
    import importlib

    try:
        module = importlib.import_module("slime.rollout.sglang_rollout")
    except ImportError:
        return False
    state = getattr(module, "GenerateState", None)
    return bool(getattr(state(args), "aborted", False)) if state is not None else False


def _tokenizer(args: Any) -> Any:
    if HOOKS.tokenizer is not None:
        return HOOKS.tokenizer(args)
    return _require_slime("slime.rollout.sglang_rollout").GenerateState(args).tokenizer


def context_budget(args: Any) -> int:
    """The episode's context budget: ``--rollout-max-context-len``, else the reference's 24,576."""
    return int(getattr(args, "rollout_max_context_len", None) or DEFAULT_CONTEXT_BUDGET)


def turn_max_new_tokens(params: Mapping[str, Any], budget: int, prompt_len: int) -> int:
    """One turn's ``max_new_tokens``: slime's per-turn cap (``--rollout-max-response-len``), never more than the
    context the prompt leaves (at least 1; the rollout core ends an episode whose prompt leaves no room)."""
    cap = int(params.get("max_new_tokens") or budget)
    return max(1, min(cap, budget - prompt_len))


def sglang_backend(args: Any, sampling_params: Mapping[str, Any]) -> Callable[[list[int]], Any]:
    """Exact-token generation through the SGLang router's native ``/generate`` (log-probs on); each turn asks
    for at most what the context budget leaves (:func:`turn_max_new_tokens`)."""
    import httpx

    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate"
    base = dict(sampling_params)
    budget = context_budget(args)

    async def generate(prompt_ids: list[int]) -> Generation:
        params = {**base, "max_new_tokens": turn_max_new_tokens(base, budget, len(prompt_ids))}
        loop_id = id(asyncio.get_running_loop())  # one pooled client per worker's event loop
        client = _CLIENTS.get(loop_id)
        if client is None:
            _CLIENTS.clear()
            client = _CLIENTS[loop_id] = httpx.AsyncClient(
                timeout=None, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256))
        response = await client.post(url, json={"input_ids": prompt_ids, "sampling_params": params,
                                                "return_logprob": True})
        response.raise_for_status()
        out = response.json()
        meta = out.get("meta_info") or {}
        pairs = meta.get("output_token_logprobs") or []
        finish = (meta.get("finish_reason") or {}).get("type", "stop")
        return Generation([int(p[1]) for p in pairs], [float(p[0]) for p in pairs], str(finish))

    return generate


def _environment(args: Any) -> EnvironmentFactory:
    if HOOKS.environment is not None:
        return HOOKS.environment(args)
    url = getattr(args, "shopsim_env_url", None)
    data = getattr(args, "shopsim_data", None)
    key = (url, data)
    if key not in _ENVIRONMENTS:
        if url:
            _ENVIRONMENTS[key] = ServiceEnvironment(url)
        elif data:
            from ..env.shop_env import ShopWorld

            _ENVIRONMENTS[key] = InProcessEnvironment(ShopWorld.shared(data), threaded=True)
        else:
            raise AdapterError("set --shopsim-env-url URL (a `shopsimrl serve`) or --shopsim-data DIR")
    return _ENVIRONMENTS[key]


def task_of(sample: Any) -> tuple[int, str]:
    """The task id and split of a task-data line (``prompt`` = the id, ``metadata`` per docs/contract.md#grpo)."""
    row = parse_slime_sample(sample)
    return row.task_id, row.split


def context_of(sample: Any) -> RolloutContext:
    """The sample's rollout context; ``metadata.shopper`` makes it a dialogue episode."""
    row = parse_slime_sample(sample)
    return RolloutContext.for_task(row.task_id, row.shopper)


def check_args(args: Any, sampling_params: Mapping[str, Any], sample: Any, evaluation: bool = False) -> None:
    """The reference guards: no partial rollout or group RM; training also needs train tasks and untruncated
    sampling (exact log-prob replay), evaluation does not."""
    if getattr(args, "partial_rollout", False) and not evaluation:
        raise AdapterError("partial rollout is not supported: an episode must run to its end")
    if getattr(args, "group_rm", False):
        raise AdapterError("--group-rm is not supported: the environment scores each episode")
    if evaluation:
        return
    _, split = task_of(sample)
    if split != "train":
        raise AdapterError(f"split {split!r}: only train tasks are rolled out here (use `shopsimrl eval`)")
    top_p = float(sampling_params.get("top_p", 1.0))
    top_k = int(sampling_params.get("top_k", -1))
    if top_p != 1.0 or top_k != -1:
        raise AdapterError("exact log-prob replay needs top_p == 1.0 and top_k == -1")


def reward_dict(trajectory: Trajectory) -> dict[str, Any]:
    """``reward`` = r_strict (slime's ``--reward-key reward``) plus the numeric reward components."""
    out: dict[str, Any] = {"reward": trajectory.reward}
    for key, value in (trajectory.reward_detail or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    if trajectory.scored and out["reward"] != out.get("r_strict"):
        raise AdapterError("reward must equal r_strict")
    return out


def to_samples(sample: Any, trajectory: Trajectory, tokenizer: Any) -> list[Any]:
    """Fan a trajectory out into slime ``Sample``s (copies of the input sample, one per segment)."""
    status_cls = type(sample).Status
    rollout_id = rollout_id_of(sample)
    turns, errors = turn_counts(trajectory.steps)
    base_meta = {**(getattr(sample, "metadata", None) or {}), "rollout_id": rollout_id,
                 "shopsim_turns": turns, "shopsim_protocol_errors": errors,
                 "termination_reason": trajectory.metadata.get("termination_reason"),
                 "shopsim_steps": len(trajectory.steps),
                 # the page key of each model turn of the episode, in order (GiGPO step groups: step_keys)
                 "shopsim_state_keys": model_turn_keys(trajectory.steps)}
    if not trajectory.scored:
        placeholder = copy.copy(sample)
        placeholder.tokens, placeholder.response_length, placeholder.loss_mask = [0, 0], 1, [0]
        placeholder.rollout_log_probs, placeholder.response = [0.0], ""
        placeholder.reward = {"reward": 0.0}
        placeholder.remove_sample = True
        placeholder.status = status_cls.ABORTED
        placeholder.rollout_id = rollout_id
        placeholder.metadata = {**base_meta, "shopsim_scored": False, "shopsim_error": trajectory.error,
                                "segment": 0, "segments": 1}
        return [placeholder]
    status = status_cls.TRUNCATED if trajectory.status == TRUNCATED else status_cls.COMPLETED
    reward = reward_dict(trajectory)
    out = []
    for k, segment in enumerate(trajectory.segments):
        s = copy.copy(sample)
        s.tokens = list(segment.tokens)
        s.response_length = len(segment.tokens) - segment.prompt_length
        s.loss_mask = list(segment.response_mask)
        s.rollout_log_probs = list(segment.response_log_probs)
        s.response = tokenizer.decode(segment.response_tokens, skip_special_tokens=False)
        s.reward = dict(reward)
        s.status = status
        s.remove_sample = False
        s.rollout_id = rollout_id
        s.metadata = {**base_meta, "shopsim_scored": True, "segment": k, "segments": len(trajectory.segments)}
        out.append(s)
    return out


def rollout_id_of(sample: Any) -> Any:
    """The id every segment of this episode shares: slime's ``rollout_id`` if the data source set one, else
    the sample's ``index`` (slime's own fallback)."""
    rollout_id = getattr(sample, "rollout_id", None)
    return sample.index if rollout_id is None else rollout_id


def evaluation_sample(samples: list[Any]) -> Any:
    """One ``Sample`` per evaluated episode (slime's eval averages ``reward`` over the returned samples)."""
    last = samples[-1]
    last.metadata = {**(last.metadata or {}), "evaluation": True}
    return last


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> list[Any]:
    """slime's custom generate: one episode → a list of ``Sample``s (one per segment; one for evaluation)."""
    check_args(args, sampling_params, sample, evaluation)
    context = context_of(sample)
    tokenizer = _tokenizer(args)
    check_template(tokenizer)  # refuses, loudly, a template whose tool calls cannot be read back
    backend = (HOOKS.backend or sglang_backend)(args, sampling_params)

    async def guarded(prompt_ids: list[int]) -> Any:
        if slime_aborted(args):  # slime's batch is full: no further generate call for this episode
            raise RolloutError("slime aborted the rollout step before this turn", code="slime_aborted")
        out = backend(prompt_ids)
        return await out if inspect.isawaitable(out) else out

    max_steps = getattr(args, "shopsim_max_steps", None)  # None: the episode's own limit (40 in dialogue)
    config = RolloutConfig(max_steps=None if max_steps is None else int(max_steps), max_context_len=context_budget(args))
    meta = {"group_index": sample.group_index, "rollout_id": rollout_id_of(sample)}
    gate = _gate(args)
    # evaluation samples have no group_index: each is a group of its own, so the gate bounds them too
    group = sample.group_index if sample.group_index is not None else ("ungrouped", id(sample))
    await gate.enter(group)
    try:
        if slime_aborted(args):
            trajectory = aborted_trajectory(context, "slime aborted the rollout step before the episode began", meta)
        else:
            trajectory = await run_rollout(context, tokenizer, guarded, _environment(args),
                                           config=config, metadata=meta)
    finally:
        gate.leave(group)
    samples = to_samples(sample, trajectory, tokenizer)
    return [evaluation_sample(samples)] if evaluation else samples


def aborted_trajectory(context: RolloutContext, message: str, metadata: Mapping[str, Any]) -> Trajectory:
    """An unscored episode that never started (no environment session, no generate call)."""
    return Trajectory(task_id=context.task_id, status=ABORTED, segments=[], reward=0.0, reward_detail=None,
                      generated_tokens=[], messages=[], steps=[], metadata=dict(metadata),
                      error={"stage": "start", "type": RolloutError.__name__, "code": "slime_aborted",
                             "message": message})


__all__ = [
    "DROP_UNSCORED", "DROP_ZERO_SPREAD", "TASKS_SCHEMA", "FilterOutput", "configure", "fully_scored_group_filter", "generate",
    "log_rollout_health",
    "normalize_grpo_by_prompt_and_rollout", "sglang_backend", "task_lines",
]


def task_lines(task_ids: Sequence[int], split: str = "train", *, shopper: str | None = None,
               tiers: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """slime task data (JSONL lines, :func:`shopsimrl.train.row_codec.slime_line`): the prompt is the task id; the
    real prompt comes from the reset. ``shopper`` adds ``metadata.shopper``: dialogue episodes; ``tiers``
    (``catalog.tiers.read_tiers``) adds ``metadata.difficulty``. Choose the ids with
    ``catalog.tiers.split_task_ids`` (its ``difficulty`` filter)."""
    return [slime_line(row) for row in rows_of(task_ids, shopper=shopper, split=split, tiers=tiers or None)]
