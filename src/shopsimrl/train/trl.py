"""TRL adapter: a ``rollout_func`` for ``trl.GRPOTrainer`` (TRL ≥ 1.16) that plays shop episodes.

The dataset's ``prompt`` column holds task ids (as strings); TRL's sampler already repeats each prompt
``num_generations`` times, so every prompt is one episode and siblings share the task (one context). Each
episode runs the rollout core in *append* mode — one exact sequence — and comes back as ``prompt_ids`` (the
first prompt), ``completion_ids`` (everything after it), ``logprobs`` (sampled tokens' log-probs, 0 elsewhere),
``env_mask`` (1 on sampled tokens: TRL trains only those) and ``shop_reward`` (r_strict), which
:func:`shop_reward` hands to the trainer as the reward.

Generation uses the trainer's own model (``model.generate``, fine on CPU and for small runs); pass
``generate_factory`` to use a server instead. Install with ``pip install 'shopsimrl[train]'`` (torch first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..agent.runtime import EnvironmentFactory
from ..errors import ShopSimError
from .rollout import FINISH_LENGTH, FINISH_STOP, Generation, RolloutConfig, RolloutContext, run_rollout

INSTALL_HINT = "TRL is not installed: `pip install torch` (CPU or CUDA build) then `pip install 'shopsimrl[train]'`"


class TrlAdapterError(ShopSimError):
    """TRL/torch missing, or a prompt that is not a task id."""


def require_trl() -> Any:
    try:
        import trl
    except ImportError as exc:
        raise TrlAdapterError(INSTALL_HINT) from exc
    return trl


def model_generate(model: Any, tokenizer: Any, *, max_new_tokens: int = 256, temperature: float = 1.0
                   ) -> Callable[[list[int]], Generation]:
    """Sample with ``model.generate`` and return the sampled ids with their log-probs (full distribution)."""
    import torch

    eos = tokenizer.eos_token_id

    def generate(prompt_ids: list[int]) -> Generation:
        device = next(model.parameters()).device
        inputs = torch.tensor([prompt_ids], device=device)
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


def _task_id(prompt: Any) -> int:
    text = prompt if isinstance(prompt, str) else (prompt[-1].get("content") if isinstance(prompt, list) else None)
    try:
        return int(str(text).strip())
    except ValueError as exc:
        raise TrlAdapterError(f"prompt {prompt!r} is not a task id") from exc


def make_rollout_func(environment: EnvironmentFactory, *, max_new_tokens: int = 256, temperature: float = 1.0,
                      max_steps: int = 30, generate_factory: Callable[[Any], Callable[[list[int]], Any]] | None = None,
                      ) -> Callable[[list[Any], Any], dict[str, Any]]:
    """A ``rollout_func(prompts, trainer)`` for ``GRPOTrainer``."""
    config = RolloutConfig(mode="append", max_steps=max_steps)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        generate = (generate_factory(trainer) if generate_factory is not None else
                    model_generate(trainer.accelerator.unwrap_model(trainer.model), tokenizer,
                                   max_new_tokens=max_new_tokens, temperature=temperature))

        async def play() -> list[Any]:
            return [await run_rollout(RolloutContext(_task_id(p)), tokenizer, generate, environment, config=config)
                    for p in prompts]

        trajectories = asyncio.run(play())
        out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                               "shop_reward": [], "shop_status": []}
        for t in trajectories:
            if t.segments:
                seg = t.segments[0]
                prompt, response = seg.tokens[: seg.prompt_length], seg.response_tokens
                mask, log_probs = seg.response_mask, seg.response_log_probs
            else:  # aborted before sampling: an empty, untrained completion
                prompt, response, mask, log_probs = [tokenizer.eos_token_id], [tokenizer.eos_token_id], [0], [0.0]
            out["prompt_ids"].append(prompt)
            out["completion_ids"].append(response)
            out["logprobs"].append(log_probs)
            out["env_mask"].append(mask)
            out["shop_reward"].append(t.reward if t.scored else None)
            out["shop_status"].append(t.status)
        return out

    return rollout_func


def shop_reward(prompts: Sequence[Any], completions: Sequence[Any], shop_reward: Sequence[float | None],
                **kwargs: Any) -> list[float | None]:
    """Reward function: the environment's r_strict that the rollout function returned (None: unscored)."""
    return list(shop_reward)
