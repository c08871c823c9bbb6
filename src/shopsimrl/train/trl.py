"""TRL adapter: a ``rollout_func`` for ``trl.GRPOTrainer`` (TRL ≥ 1.16) that plays shop episodes.

The dataset's ``prompt`` column holds task ids (as strings; :func:`task_prompts` builds it); TRL's sampler
already repeats each prompt ``num_generations`` times, so every prompt is one episode and siblings share the task
(one context). TRL hands ``rollout_func`` the prompts only, so a dialogue task carries its shopper in
the prompt itself: ``"17@rule"`` plays task 17 against the rule shopper (``multi_turn``, 40 turns, the shopper's
opening as the first user message); its replies are tool results, so ``env_mask`` is 0 on them. Episodes
run concurrently (``concurrency`` at a time, asyncio; a synchronous generate runs in worker threads), each
through the rollout core in *append* mode — one exact sequence — and come back as ``prompt_ids`` (the first
prompt), ``completion_ids`` (everything after it: several turns), ``logprobs`` (sampled tokens' log-probs, 0
elsewhere), ``env_mask`` (1 on sampled tokens, 0 on tool results, feedback and headers: TRL trains only the
1s) and ``shop_reward`` (r_strict), which :func:`shop_reward` hands to the trainer as the reward, and
``shop_state_keys`` (the page key of each model turn, for GiGPO step groups: :mod:`shopsimrl.train.step_keys`),
which TRL passes to every reward function as a keyword argument.

Failures are never silent: the batch's aborted fraction and template failures are logged as trainer metrics
(``shop/aborted_frac``, ``shop/template_errors``), and a chat-template failure raises :class:`AdapterError`
unless ``on_template_error="metric"``.

Generation: the trainer's own model (``model.generate``, fine on CPU and for small runs), or an
OpenAI-compatible vLLM/SGLang server through :func:`server_generate` (token ids in, token ids and log-probs
out). :class:`ShopToolEnvironment` is the alternative for TRL's own tool loop (``environment_factory``).
Install with ``pip install 'shopsimrl[train]'`` (torch first).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agent.episode_env import EnvironmentFactory
from ..errors import AdapterError
from .groups import drop_unscored_groups
from .health import batch_health, turn_counts
from .rollout import (
    ABORTED,
    DEFAULT_CONTEXT_BUDGET,
    FINISH_LENGTH,
    FINISH_STOP,
    Generation,
    RolloutConfig,
    RolloutContext,
    Trajectory,
    run_rollout,
)
from .row_codec import parse_prompt, prompt_columns, rows_of
from .server_generate import server_generate
from .step_keys import model_turn_keys
from .template_probe import check_template
from .trl_environment import ShopDialogueToolEnvironment, ShopToolEnvironment

__all__ = ["AdapterError", "ShopDialogueToolEnvironment", "ShopToolEnvironment", "make_rollout_func",
           "model_generate", "server_generate", "shop_reward", "task_prompts"]


def model_generate(model: Any, tokenizer: Any, *, max_new_tokens: int = 256, temperature: float = 1.0
                   ) -> Callable[[list[int]], Generation]:
    """Sample with ``model.generate`` and return the sampled ids with their log-probs (full distribution)."""
    import threading

    import torch

    eos = tokenizer.eos_token_id
    lock = threading.Lock()  # one generate at a time on the shared model (train/eval mode flips)

    def generate(prompt_ids: list[int]) -> Generation:
        device = next(model.parameters()).device
        inputs = torch.tensor([prompt_ids], device=device)
        with lock:
            was_training = model.training
            model.eval()
            with torch.no_grad():
                out = model.generate(inputs, attention_mask=torch.ones_like(inputs), do_sample=True,
                                     temperature=temperature, top_p=1.0, top_k=0, max_new_tokens=max_new_tokens,
                                     output_scores=True, return_dict_in_generate=True, eos_token_id=eos,
                                     pad_token_id=tokenizer.pad_token_id)
                scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
            if was_training:
                model.train()
        ids = out.sequences[0, len(prompt_ids):].tolist()
        log_probs = scores[0].tolist()[: len(ids)]
        if eos in ids:  # keep up to and including the end of turn
            cut = ids.index(eos) + 1
            ids, log_probs = ids[:cut], log_probs[:cut]
            return Generation(ids, log_probs, FINISH_STOP)
        return Generation(ids, log_probs, FINISH_LENGTH if len(ids) >= max_new_tokens else FINISH_STOP)

    return generate


def task_prompts(task_ids: Sequence[int], shopper: str | None = None, *,
                 tiers: Mapping[int, str] | None = None) -> dict[str, list[Any]]:
    """Dataset columns for :func:`make_rollout_func`: ``prompt`` (``"17"``, or ``"17@rule"`` with a shopper),
    plus ``task_id`` and ``shopper`` for readers of the dataset; with ``tiers`` (``catalog.tiers.read_tiers``)
    a ``difficulty`` column for a curriculum sampler. Choose the ids with ``catalog.tiers.split_task_ids``."""
    return prompt_columns(rows_of(task_ids, shopper=shopper, tiers=tiers), difficulty=tiers is not None)


def _context(prompt: Any) -> RolloutContext:
    """A prompt (``"17"``, ``"17@rule"``, or a conversation whose last message is one) → its rollout context."""
    row = parse_prompt(prompt)
    return RolloutContext.for_task(row.task_id, row.shopper)


async def run_episodes(prompts: Sequence[Any], tokenizer: Any, generate: Callable[[list[int]], Any],
                       environment: EnvironmentFactory, config: RolloutConfig, *, concurrency: int = 8
                       ) -> list[Trajectory]:
    """One episode per prompt, at most ``concurrency`` at a time; results in prompt order."""
    contexts = [_context(p) for p in prompts]
    limit = asyncio.Semaphore(max(1, concurrency))
    is_async = inspect.iscoroutinefunction(generate) or inspect.iscoroutinefunction(
        type(generate).__call__)
    threaded = concurrency > 1 and not is_async

    async def call(ids: list[int]) -> Any:
        return await asyncio.to_thread(generate, ids)

    gen = call if threaded else generate

    async def one(context: RolloutContext) -> Trajectory:
        async with limit:
            return await run_rollout(context, tokenizer, gen, environment, config=config)

    return list(await asyncio.gather(*(one(c) for c in contexts)))


DEFAULT_MAX_CONTEXT = DEFAULT_CONTEXT_BUDGET  # the reference run's context (docs/training.md, context policy)


def sibling_groups(prompts: Sequence[Any], num_generations: int | None) -> list[int]:
    """The GRPO group of each prompt: TRL's sampler repeats a prompt ``num_generations`` times in a row, so a
    group is one such block (runs of equal prompts when the batch is not made of whole blocks)."""
    keys = [repr(p) for p in prompts]
    n = num_generations or 0
    if n > 0 and len(keys) % n == 0 and all(len(set(keys[i:i + n])) == 1 for i in range(0, len(keys), n)):
        return [i // n for i in range(len(keys))]
    groups, current = [], -1
    for i, key in enumerate(keys):
        current += i == 0 or key != keys[i - 1]
        groups.append(current)
    return groups


def make_rollout_func(environment: EnvironmentFactory, *, max_new_tokens: int = 256, temperature: float = 1.0,
                      max_steps: int | None = None, concurrency: int = 8, on_template_error: str = "raise",
                      generate_factory: Callable[[Any], Callable[[list[int]], Any]] | None = None,
                      max_context: int | None = DEFAULT_MAX_CONTEXT,
                      on_trajectories: Callable[[list[Trajectory], Any], None] | None = None,
                      ) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A ``rollout_func(prompts, trainer)`` for ``GRPOTrainer`` (``max_steps`` None: each episode's own turn
    limit, 30 or 40 in dialogue mode; ``max_context``: the episode's context budget, the inference server's
    ``--max-model-len``, see the context policy in docs/training.md; ``on_trajectories(trajectories, trainer)``:
    sees each batch's episodes before they are converted, e.g. to record training curves)."""
    if on_template_error not in ("raise", "metric"):
        raise AdapterError("on_template_error must be 'raise' or 'metric'")
    config = RolloutConfig(mode="append", max_steps=max_steps, max_context_len=max_context)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        check_template(tokenizer)  # refuses, loudly, a template whose tool calls cannot be read back
        generate = (generate_factory(trainer) if generate_factory is not None else
                    model_generate(trainer.accelerator.unwrap_model(trainer.model), tokenizer,
                                   max_new_tokens=max_new_tokens, temperature=temperature))
        trajectories = asyncio.run(run_episodes(prompts, tokenizer, generate, environment, config,
                                                concurrency=concurrency))
        if on_trajectories is not None:
            on_trajectories(trajectories, trainer)
        out = trajectories_to_trl(trajectories, tokenizer)
        # the unscored-sibling rule (shopsimrl.train.groups): TRL gives a None-reward row advantage 0 and keeps
        # it out of the group mean, so every sibling of an unscored episode is handed None
        out["shop_reward"] = drop_unscored_groups(
            out["shop_reward"], sibling_groups(prompts, getattr(trainer, "num_generations", None)))
        template_errors = sum(1 for t in trajectories if (t.error or {}).get("code") == "chat_template")
        _log(trainer, {"shop/aborted_frac": sum(t.status == ABORTED for t in trajectories) / max(1, len(prompts)),
                       "shop/template_errors": float(template_errors),
                       "shop/turns_mean": sum(len(t.steps) for t in trajectories) / max(1, len(prompts)),
                       "shop/dropped_groups_frac": sum(r is None for r in out["shop_reward"]) / max(1, len(prompts)),
                       **batch_health([turn_counts(t.steps) for t in trajectories], "TRL rollout_func")})
        if template_errors and on_template_error == "raise":
            first = next(t.error for t in trajectories
                         if t.error is not None and t.error.get("code") == "chat_template")
            raise AdapterError(f"{template_errors}/{len(prompts)} episodes failed on the chat template: "
                                  f"{first['message']}")
        return out

    return rollout_func


def trajectories_to_trl(trajectories: Sequence[Trajectory], tokenizer: Any) -> dict[str, Any]:
    """TRL's rollout_func keys from append-mode trajectories (an aborted one: a masked, unscored stub)."""
    out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                           "shop_reward": [], "shop_status": [], "shop_state_keys": []}
    for t in trajectories:
        if t.segments and t.scored:
            seg = t.segments[0]
            prompt, response = seg.tokens[: seg.prompt_length], seg.response_tokens
            mask, log_probs = seg.response_mask, seg.response_log_probs
        else:  # aborted: an empty, untrained completion
            prompt, response, mask, log_probs = [tokenizer.eos_token_id], [tokenizer.eos_token_id], [0], [0.0]
        out["prompt_ids"].append(prompt)
        out["completion_ids"].append(response)
        out["logprobs"].append(log_probs)
        out["env_mask"].append(mask)
        out["shop_reward"].append(t.reward if t.scored else None)
        out["shop_status"].append(t.status)
        out["shop_state_keys"].append(model_turn_keys(t.steps))  # TRL hands extra keys to the reward functions
    return out


def _log(trainer: Any, values: dict[str, float]) -> None:
    metrics = getattr(trainer, "_metrics", None)  # TRL's per-mode metric lists, averaged into the logs
    if not isinstance(metrics, dict):
        return
    mode = "train" if getattr(getattr(trainer, "model", None), "training", True) else "eval"
    bucket = metrics.get(mode)
    if bucket is None:
        return
    for key, value in values.items():
        bucket[key].append(float(value))


def shop_reward(prompts: Sequence[Any], completions: Sequence[Any], shop_reward: Sequence[float | None],
                **kwargs: Any) -> list[float | None]:
    """Reward function: the environment's r_strict that the rollout function returned (None: unscored)."""
    return list(shop_reward)
