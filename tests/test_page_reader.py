"""The renderer's reader (``env._observation.read_observation``): what a text-only policy sees is the state.

Every page of random walks over every fixture task (single-turn and dialogue) is rendered and read back; the
fields the text shows must equal the ``observation_state`` the environment built, and the tools rebuilt from
the text (the policy server's static-tool path) must equal the environment's own tools.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shopsimrl.agent.page_tools import page_tools
from shopsimrl.agent.prompt import first_user_message
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.env._observation import read_observation
from shopsimrl.env.tools import episode_tools, tools_for_state


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


def _walk(world: ShopWorld, task_id: int, shopper: str | None, seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    env = world.new_env(shoppers=shopper_registry())
    reset = env.reset(task_id, shopper=shopper) if shopper else env.reset(task_id)
    yield reset
    for _ in range(30):
        tools = env.tools()
        if not tools:
            return
        function = rng.choice(tools)["function"]
        if function["name"] == "click":
            action = f"click[{rng.choice(function['parameters']['properties']['value']['enum'])}]"
        elif function["name"] == "search":
            action = f"search[{reset['task_instruction'][:10] or '枕头'}]"
        else:
            action = "ask_user[预算多少？]"
        if rng.random() < 0.15:
            action = rng.choice(["click[nothing here]", "search[]", "foo[bar]", "ask_user[ ]", "click[buy now]"])
        result = env.step(action)
        yield result
        if result["done"]:
            return


def _pages(world: ShopWorld) -> Iterator[tuple[dict[str, Any], str | None]]:
    for task_id in world.catalog.split("all"):
        for shopper in (None, "rule"):
            for seed in range(2):
                for result in _walk(world, task_id, shopper, seed):
                    yield result, shopper


def test_the_text_reads_back_as_the_state(world: ShopWorld) -> None:
    seen: set[str] = set()
    for result, _ in _pages(world):
        state, read = result["observation_state"], read_observation(result["observation"])
        seen.add(state["page_type"])
        assert read["page_type"] == state["page_type"]
        assert read["actions"] == state["actions"] and read["search_available"] == state["search_available"]
        if "dialogue" in state and state["page_type"] != "terminal":
            assert read["dialogue"]["ask_user_available"] == state["dialogue"]["ask_user_available"]
            assert read["dialogue"]["questions_asked"] == state["dialogue"]["questions_asked"]
        else:
            assert "dialogue" not in read
        last = state.get("last_action")
        if last is None:
            assert "last_action" not in read
        else:
            assert read["last_action"]["valid"] == last["valid"]
            assert read["last_action"].get("reply") == last.get("reply")
        if state["page_type"] == "search_results":
            assert (read["page"], read["total_pages"]) == (state["page"], state["total_pages"])
            products = read.get("products", [])
            assert [(p["rank"], p["asin"]) for p in products] == [(p["rank"], p["asin"]) for p in state["products"]]
        if state["page_type"] == "product_detail":
            assert read["product"]["asin"] == state["product"]["asin"]
            assert read["available_options"].keys() == state["available_options"].keys()
            assert read.get("selected_options", {}) == state["selected_options"]
            assert read.get("missing_option_axes", []) == state["missing_option_axes"]
    assert seen >= {"search_home", "search_results", "product_detail", "terminal"}


def test_static_tools_rebuild_exactly_the_pages_tools_in_both_modes(world: ShopWorld) -> None:
    """The policy server's path for MCP clients: the page's tools from the text (in dialogue mode the ``对话：``
    line once read as a clickable value, so the rebuilt enum had one value too many)."""
    checked = 0
    for result, shopper in _pages(world):
        messages = [{"role": "system", "content": "s"},
                    {"role": "user", "content": first_user_message("task", result["observation"])}]
        own = tools_for_state(result["observation_state"])  # what ShopEnv.tools() gives on this page
        if own:
            assert page_tools(messages, episode_tools(dialogue=shopper is not None)) == own
            checked += 1
    assert checked > 50
