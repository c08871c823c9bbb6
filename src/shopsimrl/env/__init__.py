"""The episode engine: page state machine, observation v7, tools, variant price and the paper reward."""

from ._reward import (
    attribute_reward,
    empty_reward_detail,
    option_reward,
    score_purchase,
    title_terms,
    type_reward,
)
from .checker import EnvCheckError, check_env, check_env_async
from .interface import AsyncShopEnvironment, ResetResult, ShopEnvironment, StepResult, TerminateResult
from .shop_env import ShopEnv, ShopWorld

__all__ = [
    "AsyncShopEnvironment",
    "EnvCheckError",
    "ResetResult",
    "ShopEnv",
    "ShopEnvironment",
    "ShopWorld",
    "StepResult",
    "TerminateResult",
    "attribute_reward",
    "check_env",
    "check_env_async",
    "empty_reward_detail",
    "option_reward",
    "score_purchase",
    "title_terms",
    "type_reward",
]
