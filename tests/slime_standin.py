"""A stand-in for the parts of slime that touch a custom generate function (slime is not on PyPI).

Mirrored field by field, and rule by rule, from slime's public source at commit
624b824a898ab0ec1fcb4d373004c7f3852bf515 (THUDM/slime, the v0.3.1 line, "[NFC] Add observability subfolder"):

* ``slime/utils/types.py``: ``Sample`` (every dataclass field, in order, with its default), ``Sample.Status``
  and ``Sample.get_reward_value``;
* ``slime/rollout/filter_hub/base_types.py``: ``DynamicFilterOutput`` (``keep``, ``reason``,
  ``keep_when_insufficient``), ``should_drop_dynamic_filter_output``, ``call_dynamic_filter``;
* ``slime/observability/rollout_data_utils.py``: ``validate_rollout_id_annotated`` (a list of several
  ``Sample``s at depth ≥ 2 must carry one shared, non-None ``rollout_id``);
* ``slime/ray/rollout.py``: ``_get_rollout_data``'s flattening (it looks at ``data[0]`` only) and
  ``_convert_samples_to_train_data`` (rollout-id fill-in, the ``len(loss_mask) == response_length`` assert,
  ``remove_sample`` zeroing the mask, per-rollout mask sums, ``rollout_log_probs`` from ``samples[0]``);
* ``slime/observability/rollout_metrics.py``: ``log_rollout_data`` (the ``--custom-rollout-log-function-path``
  function first, its True skipping the default; the default log dict starts from ``rollout_extra_metrics``) with
  ``metric_utils.compute_rollout_step`` and ``logging_utils.log`` (recorded in :data:`LOGGED` instead of
  wandb/tensorboard); slime's own ``rollout/`` sample metrics are not mirrored;
* ``slime/rollout/sglang_rollout.py``: ``generate_and_rm`` (``evaluation=`` passed only when the custom
  function's signature has it; lists with an ``ABORTED`` member returned as they are), the dynamic-filter step of
  ``generate_rollout_async`` and the sample collection of ``eval_rollout_single_dataset``.

The code is written here from those rules; none of slime's code is copied. :func:`install` registers the
stand-in under slime's module names so that the adapter imports it as it would import slime.
"""

from __future__ import annotations

import inspect
import itertools
import sys
import types
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SLIME_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"


@dataclass
class Sample:
    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    multimodal_train_input_id: str | None = None
    apply_chat_template_kwargs: dict = field(default_factory=dict)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_top_p_token_ids: list[int] | None = None
    rollout_top_p_token_offsets: list[int] | None = None
    rollout_routed_experts: list[list[int]] | None = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    train_metadata: dict | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0

    @dataclass
    class SpecInfo:
        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

    spec_info: SpecInfo = field(default_factory=SpecInfo)

    @dataclass
    class PrefixCacheInfo:
        cached_tokens: int = 0
        total_prompt_tokens: int = 0

    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def get_reward_value(self, args: Any) -> float:
        return self.reward if not args.reward_key else self.reward[args.reward_key]


@dataclass
class DynamicFilterOutput:
    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


def should_drop_dynamic_filter_output(output: DynamicFilterOutput, *, remaining_batch_size: int,
                                      target_data_size: int) -> bool:
    if output.keep:
        return False
    return not (output.keep_when_insufficient and remaining_batch_size <= target_data_size)


def call_dynamic_filter(fn: Any, *args: Any, **kwargs: Any) -> DynamicFilterOutput:
    if fn is None:
        return DynamicFilterOutput(keep=True)
    out = fn(*args, **kwargs)
    return out if isinstance(out, DynamicFilterOutput) else DynamicFilterOutput(keep=out)


def validate_rollout_id_annotated(node: Any, depth: int = 0) -> None:
    if isinstance(node, Sample):
        return
    assert isinstance(node, list), f"unexpected rollout output node type: {type(node).__name__}"
    if node and isinstance(node[0], Sample):
        if depth >= 2 and len(node) > 1:
            ids = [s.rollout_id for s in node]
            missing = [i for i, rid in enumerate(ids) if rid is None]
            assert not missing, (f"Compact rollout returned {len(node)} samples but rollout_id is unset on "
                                 f"positions {missing}.")
            assert len(set(ids)) == 1, f"Sibling samples from one compact rollout must share rollout_id; got {ids}."
        return
    for item in node:
        validate_rollout_id_annotated(item, depth + 1)


def flatten_rollout(data: list[Any]) -> list[Sample]:
    """``_get_rollout_data``: validate, then flatten while the *first* element is a list."""
    validate_rollout_id_annotated(data)
    while isinstance(data[0], list):
        data = list(itertools.chain.from_iterable(data))
    return data


def convert_samples_to_train_data(args: Any, samples: list[Sample], post_process: Any) -> dict[str, Any]:
    raw_rewards, rewards = post_process(args, samples)
    assert len(raw_rewards) == len(samples) and len(rewards) == len(samples)
    rollout_ids = [s.rollout_id for s in samples]
    taken = {rid for rid in rollout_ids if rid is not None}
    spare = 0
    for i, rid in enumerate(rollout_ids):
        if rid is None:
            while spare in taken:
                spare += 1
            rollout_ids[i] = spare
            taken.add(spare)
    data: dict[str, Any] = {
        "tokens": [s.tokens for s in samples], "response_lengths": [s.response_length for s in samples],
        "rewards": rewards, "raw_reward": raw_rewards,
        "truncated": [1 if s.status == Sample.Status.TRUNCATED else 0 for s in samples],
        "sample_indices": [s.index for s in samples], "rollout_ids": rollout_ids,
    }
    masks = []
    for s in samples:
        if s.loss_mask is None:
            s.loss_mask = [1] * s.response_length
        assert len(s.loss_mask) == s.response_length, (
            f"loss mask length {len(s.loss_mask)} != response length {s.response_length}")
        if s.remove_sample:
            s.loss_mask = [0] * s.response_length
        masks.append(s.loss_mask)
    data["loss_masks"] = masks
    totals: dict[Any, int] = {}
    for rid, mask in zip(rollout_ids, masks, strict=True):
        totals[rid] = totals.get(rid, 0) + sum(mask)
    data["rollout_mask_sums"] = [totals[rid] for rid in rollout_ids]
    if samples[0].rollout_log_probs is not None:
        data["rollout_log_probs"] = [s.rollout_log_probs for s in samples]
    return data


async def generate_and_rm(args: Any, sample: Sample, sampling_params: dict[str, Any], custom_generate: Any,
                          evaluation: bool = False) -> Sample | list[Sample]:
    if sample.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED):
        return sample
    if "evaluation" in inspect.signature(custom_generate).parameters:
        out = await custom_generate(args, sample, sampling_params, evaluation=evaluation)
    else:
        out = await custom_generate(args, sample, sampling_params)
    items = out if isinstance(out, list) else [out]
    if any(s.status == Sample.Status.ABORTED for s in items):
        return out
    # slime would call its reward model for samples whose reward is None; the shop sets every reward itself
    assert all(s.reward is not None for s in items), "a sample without reward would go to slime's reward model"
    return out


def select_groups(args: Any, groups: list[list[Any]], dynamic_filter: Any, target_data_size: int) -> tuple[
        list[list[Any]], list[str | None]]:
    """The filter step of ``generate_rollout_async`` over groups finished in this order (all submitted)."""
    remaining = len(groups)
    data: list[list[Any]] = []
    dropped: list[str | None] = []
    for group in groups:
        assert len(group) == args.n_samples_per_prompt
        out = call_dynamic_filter(dynamic_filter, args, group)
        if should_drop_dynamic_filter_output(out, remaining_batch_size=remaining,
                                             target_data_size=target_data_size):
            dropped.append(out.reason)
            remaining -= 1
            continue
        if len(data) < target_data_size:
            data.append(group)
    return data, dropped


def collect_eval(results: list[Sample | list[Sample]], reward_key: str) -> dict[str, list[Any]]:
    """``eval_rollout_single_dataset``: lists are extended, then rewards read with the reward key."""
    data: list[Sample] = []
    for item in results:
        if isinstance(item, list):
            data.extend(item)
        else:
            data.append(item)
    data.sort(key=lambda s: s.index)
    return {"rewards": [s.reward if not reward_key else s.reward[reward_key] for s in data],
            "truncated": [s.status == Sample.Status.TRUNCATED for s in data], "samples": data}


class GenerateState:
    """slime's ``sglang_rollout.GenerateState`` as far as the adapter reads it: a per-process singleton
    (``SingletonMeta``) whose ``aborted`` flag ``abort()`` sets once the batch is full (``reset()`` clears it)."""

    _instance: GenerateState | None = None
    aborted: bool = False

    def __new__(cls, args: Any = None) -> GenerateState:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def reset(self) -> None:
        self.aborted = False


LOGGED: list[dict[str, Any]] = []  # what slime's logging_utils.log would send to wandb/tensorboard


def logging_log(args: Any, metrics: dict[str, Any], step_key: str) -> None:
    assert step_key in metrics
    LOGGED.append(dict(metrics))


def compute_rollout_step(args: Any, rollout_id: int) -> int:
    if getattr(args, "wandb_always_use_train_step", False):
        return rollout_id * args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size
    return rollout_id


def log_rollout_data(rollout_id: int, args: Any, samples: list[Any], rollout_extra_metrics: Any,
                     rollout_time: float) -> None:
    path = getattr(args, "custom_rollout_log_function_path", None)
    if path is not None:
        module, _, name = path.rpartition(".")
        import importlib

        if getattr(importlib.import_module(module), name)(rollout_id, args, samples, rollout_extra_metrics,
                                                          rollout_time):
            return
    log_dict = {**(rollout_extra_metrics or {})}
    log_dict["rollout/step"] = compute_rollout_step(args, rollout_id)
    logging_log(args, log_dict, step_key="rollout/step")


def install(monkeypatch: Any) -> None:
    """Register the stand-in under slime's module names (only the modules the adapter imports)."""
    names = {
        "slime": {}, "slime.utils": {}, "slime.utils.types": {"Sample": Sample}, "slime.rollout": {},
        "slime.rollout.sglang_rollout": {"GenerateState": GenerateState},
        "slime.rollout.filter_hub": {},
        "slime.observability": {"logging_utils": types.SimpleNamespace(log=logging_log)},
        "slime.observability.metric_utils": {"compute_rollout_step": compute_rollout_step},
        "slime.rollout.filter_hub.base_types": {"DynamicFilterOutput": DynamicFilterOutput,
                                               "should_drop_dynamic_filter_output": should_drop_dynamic_filter_output,
                                               "call_dynamic_filter": call_dynamic_filter},
    }
    for name, attrs in names.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
