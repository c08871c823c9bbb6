"""verl adapter: an agent loop (``AgentLoopBase.run``) that plays one shop episode per dataset row.

verl trains one token sequence per sample, so the rollout core runs in *append* mode: the exact sampled tokens
stay in the sequence and only the rendered new messages (tool results, repair feedback, the next assistant
header) are appended with mask 0. ``run`` returns ``prompt_ids`` (the first prompt), ``response_ids`` (all
later tokens), ``response_mask`` (1 on sampled tokens), ``response_logprobs`` and ``reward_score`` = r_strict.

What verl's own post-processing (``AgentLoopWorker._agent_loop_postprocess`` / ``_postprocess``, verl 0.9.1)
needs, and this module guarantees for every row, so that one episode can never fail a whole batch:

* ``len(prompt_ids) <= rollout.prompt_length`` and ``len(response_ids) <= rollout.response_length``. A first
  prompt longer than ``prompt_length`` is not cut (the model saw all of it): its overflow moves to the front
  of the response with mask 0 (``shopsim_prompt_overflow`` counts those tokens). Each turn asks the server for
  at most ``min(max_tokens_per_turn, what is left of the budget)`` tokens (``max_tokens``); a response still
  over budget is cut at the end (``shopsim_response_cut``).
* an aborted episode (environment or engine failure, a row without a task id) comes back as a masked
  zero-reward output (one masked token), never as an exception; ``shopsim_status`` says what happened.
* unscored rows (aborted, invalid) never enter an advantage: the recipe's ``algorithm.adv_estimator=shopsim_grpo``
  (:mod:`shopsimrl.train.verl_grpo`) applies the unscored-sibling rule of :mod:`shopsimrl.train.groups` and
  drops their whole group; verl's stock ``grpo`` would average their reward 0 into the siblings' baseline.
* ``response_logprobs`` is a list exactly when verl asked for log-probs (``rollout.calculate_log_probs``),
  else None, for every row alike (verl concatenates them batch-wide).

verl's vLLM server reports ``stop_reason="completed"`` for a stop *and* for a length cut-off, so a turn is
taken as cut off when it returned ``max_tokens`` tokens without ending on the end-of-turn token.

Register it in an agent-loop config file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``)::

    - name: shopsim
      _target_: shopsimrl.train.verl.ShopAgentLoop

Optional keys there are passed to the constructor: ``env_url``, ``data_dir``, ``max_steps``,
``max_tokens_per_turn``. Without them the environment comes from ``SHOPSIM_ENV_URL`` (a ``shopsimrl serve``)
or ``SHOPSIM_DATA`` (an in-process catalog directory). Every dataset row needs ``agent_name: shopsim`` and
``extra_info: {task_id: N}`` (``examples/verl/build_tasks.py`` writes such a parquet file). A row whose
``extra_info`` also has ``shopper: rule`` is a dialogue episode (``build_tasks.py --shopper rule``):
``multi_turn``, 40 turns unless ``max_steps`` caps it, the shopper's opening as the first user message, and its
replies appended as tool results with ``response_mask`` 0.

Importing this module needs no verl; ``ShopAgentLoop`` imports verl on first access and names what to install.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent.episode import EpisodeStats
from ..agent.episode_env import EnvironmentFactory, InProcessEnvironment, ServiceEnvironment
from ..agent.model_client import DEFAULT_MAX_TOKENS
from ..errors import AdapterError
from .health import turn_counts
from .rollout import (
    ABORTED,
    FINISH_ABORT,
    FINISH_LENGTH,
    FINISH_STOP,
    Generation,
    RolloutConfig,
    RolloutContext,
    Trajectory,
    run_rollout,
)
from .row_codec import AGENT_NAME as AGENT_NAME
from .row_codec import DATA_SOURCE as DATA_SOURCE
from .row_codec import parse_verl_row, rows_of, shopper_field, verl_row
from .step_keys import join_keys, model_turn_keys
from .template_probe import check_template

VERL_VERSION = "0.9.1"
INSTALL_HINT = (f"verl is not installed: `pip install 'shopsimrl[verl]'` (verl {VERL_VERSION}; it pins "
                "transformers<5.11, so give it its own environment; training needs a GPU machine)")
# Modules verl 0.9.1 imports but does not declare (or that a slim install lacks) → the pip name to install.
PIP_NAMES = {"cachetools": "cachetools", "PIL": "pillow", "yaml": "pyyaml", "hydra": "hydra-core",
             "omegaconf": "omegaconf", "tensordict": "tensordict", "ray": "ray", "codetiming": "codetiming"}
STATUS_INVALID_ROW = "invalid_row"
log = logging.getLogger(__name__)


def install_hint(exc: ImportError) -> str:
    """The precise install instruction for an import failure of verl's agent-loop module."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not name or name == "verl":
        return INSTALL_HINT
    pip_name = PIP_NAMES.get(name, name)
    return (f"verl is installed but importing its agent loop needs the module `{name}`, which is missing: "
            f"`pip install {pip_name}` (or `pip install 'shopsimrl[verl]'`, which includes it)")


def environment_from(env_url: str | None = None, data_dir: str | None = None) -> EnvironmentFactory:
    url = env_url or os.environ.get("SHOPSIM_ENV_URL")
    data = data_dir or os.environ.get("SHOPSIM_DATA")
    if url:
        return ServiceEnvironment(url)
    if data:
        from ..env.shop_env import ShopWorld

        return InProcessEnvironment(ShopWorld.shared(data), threaded=True)
    raise AdapterError("set SHOPSIM_ENV_URL (a `shopsimrl serve` URL) or SHOPSIM_DATA (a catalog directory), "
                           "or env_url / data_dir in the agent-loop config")


def context_of(kwargs: Mapping[str, Any]) -> RolloutContext:
    """A row's rollout context: ``extra_info.task_id`` and, for a dialogue row, ``extra_info.shopper``."""
    row = parse_verl_row(kwargs)
    return RolloutContext.for_task(row.task_id, row.shopper)


@dataclass(frozen=True)
class Budget:
    """verl's fixed tensor widths, and the per-turn generation cap."""

    prompt_length: int
    response_length: int
    max_tokens_per_turn: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        if min(self.prompt_length, self.response_length, self.max_tokens_per_turn) < 1:
            raise AdapterError("prompt_length, response_length and max_tokens_per_turn must be positive")

    def total(self, first_prompt: int) -> int:
        """Most tokens a sequence may hold once its first prompt is known (prompt part is capped)."""
        return min(first_prompt, self.prompt_length) + self.response_length


@dataclass
class EpisodeLog:
    """What the generate wrapper saw: the first prompt and any per-turn protocol problem."""

    first_prompt: list[int] | None = None
    turns: int = 0
    length_cuts: int = 0
    missing_log_probs: bool = False
    max_tokens: list[int] = field(default_factory=list)


def token_output_to_generation(out: Any, max_tokens: int, eos_ids: Sequence[int], want_log_probs: bool) -> Generation:
    """verl's ``TokenOutput`` (token_ids, log_probs, stop_reason) → the core's :class:`Generation`.

    A length cut-off is read from the count (``max_tokens`` tokens, not ending on an end-of-turn id), since
    verl's vLLM server says ``completed`` for both; ``aborted`` is an engine abort.
    """
    ids = [int(t) for t in out.token_ids]
    log_probs = getattr(out, "log_probs", None)
    reason = str(getattr(out, "stop_reason", None) or "completed")
    if reason == "aborted":
        finish = FINISH_ABORT
    elif len(ids) >= max_tokens and not (ids and ids[-1] in eos_ids):
        finish = FINISH_LENGTH
    else:
        finish = FINISH_STOP
    if log_probs is None:
        if want_log_probs and ids:
            raise AdapterError("the server returned no log-probs although rollout.calculate_log_probs is on")
        log_probs = [0.0] * len(ids)
    return Generation(ids, [float(p) for p in log_probs], finish)


def _eos_ids(tokenizer: Any) -> tuple[int, ...]:
    ids = getattr(tokenizer, "eos_token_id", None)
    if isinstance(ids, int):
        return (ids,)
    return tuple(int(i) for i in ids or ())


def _pad_id(tokenizer: Any) -> int:
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def output_fields(trajectory: Trajectory | None, episode: EpisodeLog, budget: Budget, tokenizer: Any, *,
                  want_log_probs: bool, status: str | None = None, error: str | None = None) -> dict[str, Any]:
    """AgentLoopOutput fields of one episode, within verl's tensor widths, never raising."""
    status = status or (trajectory.status if trajectory is not None else ABORTED)
    if error is None and trajectory is not None and trajectory.error:
        error = f"{trajectory.error.get('stage')}: {trajectory.error.get('type')}: {trajectory.error.get('message')}"
    usable = trajectory is not None and trajectory.scored and len(trajectory.segments) == 1
    if trajectory is not None and trajectory.scored and len(trajectory.segments) != 1:
        status, error = ABORTED, f"append mode produced {len(trajectory.segments)} segments, verl takes one"
    overflow = cut = 0
    if usable and trajectory is not None:
        segment = trajectory.segments[0]
        tokens, mask, log_probs = segment.tokens, segment.loss_mask, segment.log_probs
        split = min(segment.prompt_length, budget.prompt_length)
        overflow = segment.prompt_length - split
        prompt, response = tokens[:split], tokens[split:]
        response_mask, response_log_probs = mask[split:], log_probs[split:]
        if len(response) > budget.response_length:
            cut = len(response) - budget.response_length
            response = response[: budget.response_length]
            response_mask = response_mask[: budget.response_length]
            response_log_probs = response_log_probs[: budget.response_length]
        reward = float(trajectory.reward)
        if not any(response_mask):  # everything sampled was cut away: nothing to train
            usable, status, error = False, ABORTED, "no sampled token fits in rollout.response_length"
    if not usable:
        first = episode.first_prompt or []
        prompt = list(first[-budget.prompt_length:]) if first else [_pad_id(tokenizer)]
        response, response_mask, response_log_probs = [_pad_id(tokenizer)], [0], [0.0]
        reward, overflow, cut = 0.0, max(0, len(first) - budget.prompt_length), 0
    detail = (trajectory.reward_detail or {}) if (trajectory is not None and usable) else {}
    termination = trajectory.metadata.get("termination_reason") if trajectory is not None else None
    turns, errors = turn_counts(trajectory.steps) if trajectory is not None else (0, 0)
    keys = model_turn_keys(trajectory.steps) if trajectory is not None else []
    return {
        "prompt_ids": [int(t) for t in prompt], "response_ids": [int(t) for t in response],
        "response_mask": [int(m) for m in response_mask],
        "response_logprobs": [float(p) for p in response_log_probs] if want_log_probs else None,
        "num_turns": (len(trajectory.messages) if trajectory is not None else 0) + (1 if usable else 0),
        "reward_score": reward,
        "extra_fields": {
            "shopsim_status": status, "shopsim_termination_reason": termination, "shopsim_error": error,
            "shopsim_prompt_overflow": overflow, "shopsim_response_cut": cut,
            "shopsim_length_cuts": episode.length_cuts, "reward_detail": dict(detail),
            # per-row turn counts: ShopAgentLoopManager turns them into the step's protocol-error alarm
            "shopsim_turns": turns, "shopsim_protocol_errors": errors,
            # one key per model turn, space-separated (verl stores extra fields in a 1-D object array, which a
            # list per row would not survive): shopsimrl.train.step_keys.step_groups reads it
            "shopsim_state_keys": join_keys(keys),
            # fixed numeric keys: verl stacks reward_extra_info key by key over the batch
            "reward_extra_info": {"r_strict": reward, "shopsim_aborted": float(not usable),
                                  "shopsim_truncated": float(status == "truncated"),
                                  "r_success": float(detail.get("r_success", 0.0)),
                                  # the health metric (shopsimrl.train.health): its batch mean is 1.0 exactly
                                  # when every turn of the batch was a protocol error
                                  "shopsim_protocol_error_rate": errors / turns if turns else 0.0},
        },
    }


class ShopAgentLoopCore:
    """The trainer-free part of the agent loop: one episode against verl's server-manager ``generate``."""

    def __init__(self, server_manager: Any, tokenizer: Any, budget: Budget, *,
                 environment: EnvironmentFactory | None = None, max_steps: int | None = None) -> None:
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.budget = budget
        self.environment = environment
        self.max_steps = max_steps

    async def run_fields(self, sampling_params: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        want_log_probs = bool(sampling_params.get("logprobs", False))
        episode = EpisodeLog()
        try:
            context = context_of(kwargs)
        except AdapterError as exc:
            log.warning("shopsim verl row skipped: %s", exc)
            return output_fields(None, episode, self.budget, self.tokenizer, want_log_probs=want_log_probs,
                                 status=STATUS_INVALID_ROW, error=str(exc))
        check_template(self.tokenizer)  # refuses, loudly, a template whose tool calls cannot be read back
        request_id = uuid.uuid4().hex  # one id per episode: the server keeps its prefix cache warm
        eos_ids = _eos_ids(self.tokenizer)

        async def generate(prompt_ids: list[int]) -> Generation:
            if episode.first_prompt is None:
                episode.first_prompt = list(prompt_ids)
            left = self.budget.total(len(episode.first_prompt)) - len(prompt_ids)
            max_tokens = max(1, min(self.budget.max_tokens_per_turn, left))
            params = {**sampling_params, "max_tokens": max_tokens}
            params.pop("max_new_tokens", None)
            episode.max_tokens.append(max_tokens)
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=list(prompt_ids),
                                                     sampling_params=params)
            gen = token_output_to_generation(out, max_tokens, eos_ids, want_log_probs)
            episode.turns += 1
            episode.length_cuts += gen.finish_reason == FINISH_LENGTH
            return gen

        environment = self.environment or environment_from()
        config = RolloutConfig(mode="append", max_steps=self.max_steps,
                               max_context_len=self.budget.prompt_length + self.budget.response_length)
        timer = EpisodeStats()
        trajectory = await run_rollout(context, self.tokenizer, generate, environment,
                                       config=config, timer=timer)
        fields = output_fields(trajectory, episode, self.budget, self.tokenizer, want_log_probs=want_log_probs)
        fields["timing"] = {"generate_sequences": timer.model_s, "tool_calls": timer.env_s}
        if fields["extra_fields"]["shopsim_status"] == ABORTED:
            log.warning("shopsim episode (task %s) aborted: %s", context.task_id,
                        fields["extra_fields"]["shopsim_error"])
        return fields


def _build_class() -> type:
    try:
        from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
    except ImportError as exc:
        raise AdapterError(install_hint(exc)) from exc

    class ShopAgentLoop(AgentLoopBase):  # type: ignore[misc]
        """verl agent loop over the shop environment (see the module docstring)."""

        def __init__(self, *args: Any, env_url: str | None = None, data_dir: str | None = None,
                     max_steps: int | None = None, max_tokens_per_turn: int = DEFAULT_MAX_TOKENS,
                     **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            rollout = self.rollout_config
            budget = Budget(int(rollout.prompt_length), int(rollout.response_length), int(max_tokens_per_turn))
            self._core = ShopAgentLoopCore(self.server_manager, self.tokenizer, budget,
                                           environment=environment_from(env_url, data_dir),
                                           max_steps=None if max_steps is None else int(max_steps))

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            fields = await self._core.run_fields(sampling_params, **kwargs)
            timing = fields.pop("timing", {})
            extra = fields.pop("extra_fields")
            return AgentLoopOutput(**fields, extra_fields=extra, metrics=AgentLoopMetrics(**timing))

    return ShopAgentLoop


_CACHE: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "ShopAgentLoop":
        if name not in _CACHE:
            _CACHE[name] = _build_class()
        return _CACHE[name]
    raise AttributeError(name)


def task_rows(data_dir: str | os.PathLike[str], split: str = "train", limit: int | None = None, *,
              shopper: str | None = None, difficulty: str | Sequence[str] | None = None) -> list[dict[str, Any]]:
    """verl dataset rows, one per task of ``split`` (:func:`shopsimrl.train.row_codec.verl_row`): ``agent_name``,
    a ``prompt`` (the task instruction; a dialogue row names the task only) and ``extra_info.task_id``, with
    ``shopper`` ``extra_info.shopper``. ``difficulty`` keeps tasks of those tiers (``catalog/tiers.py``); when
    the catalog has tiers, every row carries its own in ``extra_info.difficulty``."""
    from ..catalog.store import Catalog
    from ..catalog.tiers import split_task_ids, stored_tiers

    shopper = shopper_field(shopper, "shopper")
    ids = split_task_ids(data_dir, split, difficulty=difficulty, limit=limit)
    document = stored_tiers(data_dir)
    tiers = {int(t): tier for tier, tasks in document["tiers"].items() for t in tasks} if document else {}
    catalog = Catalog.from_data_dir(data_dir)
    try:
        return [verl_row(row, None if shopper else str(catalog.goal(row.task_id)["instruction_text"]))
                for row in rows_of(ids, shopper=shopper, split=split, tiers=tiers or None)]
    finally:
        catalog.close()


def write_parquet(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write rows as one parquet file (pyarrow, which verl and ``datasets`` both depend on)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise AdapterError("no task rows to write (empty split?)")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), path)
