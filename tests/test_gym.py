"""The Gymnasium wrapper passes Gymnasium's own contract checker."""

from __future__ import annotations

import warnings

from gymnasium.utils.env_checker import check_env

from shopsimrl.env import ShopWorld
from shopsimrl.env.gym import ShopGymEnv


def test_gym_wrapper_passes_check_env(prepared_dir):
    env = ShopGymEnv(world=ShopWorld.from_data_dir(prepared_dir), split="train")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env, skip_render_check=True)


def test_gym_episode_terminates_on_purchase_and_truncates_on_limit(prepared_dir):
    env = ShopGymEnv(world=ShopWorld.from_data_dir(prepared_dir))
    observation, info = env.reset(options={"task_id": 0})
    assert observation.startswith("页面：搜索首页") and info["tools"][0]["function"]["name"] == "search"
    for action in ("search[小吃车 煤气灶 三锅]", "click[824100258497]", "click[颜色分类=三锅小吃车煮面炉＋关东煮＋油炸]"):
        _, reward, terminated, truncated, _ = env.step(action)
        assert (reward, terminated, truncated) == (0.0, False, False)
    _, reward, terminated, truncated, info = env.step("click[buy now]")
    assert (reward, terminated, truncated) == (1.0, True, False) and info["termination_reason"] == "purchase"
    env.reset(options={"task_id": 0})
    for _ in range(29):
        env.step("click[none]")
    _, reward, terminated, truncated, info = env.step("click[none]")
    assert (reward, terminated, truncated) == (0.0, False, True) and info["termination_reason"] == "action_limit"
