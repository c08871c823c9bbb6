"""``shopsim_grpo``: verl's GRPO advantage with the unscored-sibling rule (:mod:`shopsimrl.train.groups`).

verl's own ``grpo`` estimator takes every row of a ``uid`` group into the mean and std, so an aborted episode
(reward 0) hands its completed siblings an advantage they did not earn (+0.866 each when 2 of 4 abort). verl
cannot remove rows from a batch, so this estimator applies the project's rule the only way verl honours: it is
registered in verl's own advantage-estimator registry (``core_algos.register_adv_est``) and gives every row of a
group with an unscored sibling advantage 0 — the group is dropped from the policy loss; other groups get verl's
GRPO arithmetic ((r − mean) / (unbiased std + 1e-6), or r − mean with ``norm_adv_by_std_in_grpo=false``).

An unscored row is one with no token of mask 1: the agent loop (:mod:`shopsimrl.train.verl`) returns every
aborted or invalid episode as one masked token, and every scored one has at least one sampled token.

verl computes advantages in its driver (the ``TaskRunner`` Ray actor), so the registration must run there: the
recipe sets ``algorithm.adv_estimator=shopsim_grpo`` and Ray's ``worker_process_setup_hook`` to
:func:`register` (``+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=shopsimrl.train.verl_grpo.register``).
"""

from __future__ import annotations

from typing import Any

from .groups import flat_advantages

ESTIMATOR = "shopsim_grpo"
SETUP_HOOK = "shopsimrl.train.verl_grpo.register"


def shopsim_grpo_advantage(token_level_rewards: Any, response_mask: Any, index: Any = None, epsilon: float = 1e-6,
                           norm_adv_by_std_in_grpo: bool | None = None, config: Any = None,
                           **_: Any) -> tuple[Any, Any]:
    """verl's estimator signature: (advantages, returns), both ``[batch, response_length]``."""
    import torch

    if index is None:
        raise ValueError("shopsim_grpo needs verl's uid column (the GRPO group of each row)")
    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = bool(config.get("norm_adv_by_std_in_grpo", True)) if config is not None else True
    scores = token_level_rewards.sum(dim=-1)
    scored = response_mask.sum(dim=-1) > 0
    rewards = [float(s) if ok else None for s, ok in zip(scores.tolist(), scored.tolist(), strict=True)]
    advantages = flat_advantages(rewards, [str(u) for u in index], std_normalization=norm_adv_by_std_in_grpo,
                                 eps=epsilon)
    out = torch.tensor(advantages, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
    out = out.unsqueeze(-1) * response_mask
    return out, out


def register() -> None:
    """Register ``shopsim_grpo`` with verl (idempotent; the Ray worker setup hook)."""
    from verl.trainer.ppo import core_algos

    if core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR) is not shopsim_grpo_advantage:
        core_algos.register_adv_est(ESTIMATOR)(shopsim_grpo_advantage)
