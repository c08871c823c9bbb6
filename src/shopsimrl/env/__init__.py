"""The episode engine: page state machine, observation v7, tools, variant price and the paper reward."""

from .reward import empty_reward_detail, score_purchase
from .shop_env import ShopEnv, ShopWorld

__all__ = ["ShopEnv", "ShopWorld", "empty_reward_detail", "score_purchase"]
