"""A scripted demo episode: prepare a catalog, then search, open, select and buy, printing each page.

It is the project's main job until the agent runtime lands: it shows the whole data → search → page →
reward path on a real prepared directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .catalog.prepare import PrepareOptions, prepare_dataset
from .contract import BUY_NOW, CLICK_TOOL, SEARCH_TOOL, format_action
from .env.shop_env import ShopEnv

DEMO_ASIN = "824100258497"
DEMO_QUERY = "可移动小吃车 煤气灶 三个锅 煎锅 关东煮 油炸 1000-1200元"
DEMO_OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"


def run_demo(
    archive: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    echo: Callable[[str], None] = print,
    test_size: int = 2,
    val_size: int = 2,
) -> dict[str, Any]:
    """Prepare ``archive`` into ``out`` (cached) and play the snack-cart task to a purchase."""
    prepare_dataset(archive, out, options=PrepareOptions(test_size=test_size, val_size=val_size))
    env = ShopEnv.from_data_dir(Path(out))
    task_id = next(t for t, goal in env.world.catalog.goals.items() if goal["asin"] == DEMO_ASIN)
    reset = env.reset(task_id, persona=True)
    echo(f"任务 {task_id}：{reset['task_instruction']}\n")
    echo(reset["observation"])
    result: dict[str, Any] = {}
    for action in (format_action(SEARCH_TOOL, DEMO_QUERY), *(format_action(CLICK_TOOL, value)
                                                           for value in (DEMO_ASIN, DEMO_OPTION, BUY_NOW))):
        result = dict(env.step(action))
        echo(f">>> {action}\n")
        echo(result["observation"])
        if result["done"]:
            break
    detail = result.get("reward_detail", {})
    components = ", ".join(f"{key}={detail.get(key)}" for key in ("r_type", "r_att", "r_option", "r_price"))
    echo(f"reward (r_strict) = {result.get('reward')}  [{components}]  target_asin_match={detail.get('target_asin_match')}")
    return result
