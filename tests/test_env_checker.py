"""``check_env`` over every implementation, and one scripted episode through every path (issue 12 item 2).

The HTTP paths run against a real uvicorn server on loopback; every path keeps every rule of the checker.
"""

from __future__ import annotations

import asyncio
import copy
import warnings

import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from live_server import serve
from shopsimrl.env import EnvCheckError, ShopEnv, ShopWorld, check_env, check_env_async
from shopsimrl.env.checker import RULES
from shopsimrl.env.gym import ShopGymEnv
from shopsimrl.env.interface import PER_PATH_FIELDS
from shopsimrl.errors import ShopSimError
from shopsimrl.server import AsyncShopClient, ShopClient, create_app

PERSONA_TASK, STANDARD_TASK = 0, 1
QUERY = "可移动小吃车 煤气灶 三个锅"
ASIN = "824100258497"
OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"

# Result fields that depend on the path, not on the episode (compared by form only):
# a step's ``idx`` names the session: ``session-<task>`` in process, ``slot-<n>-<task>`` behind the service.
PER_PATH = {"idx"}


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_url(world):
    with serve(create_app(world, slots=4, reset_wait_timeout=5.0)) as url:
        yield url


def _keeps_every_rule(run) -> tuple[str, ...]:
    """Run the checker skipping nothing; every rule must have been exercised."""
    checked = run(())
    assert set(checked) == set(RULES), f"rules not exercised: {set(RULES) - set(checked)}"
    return checked


@pytest.mark.parametrize("task_id", [PERSONA_TASK, STANDARD_TASK])
def test_shop_env_passes_check_env(world, task_id):
    _keeps_every_rule(lambda skip: check_env(ShopEnv(world), task_id, skip=skip))


def test_shop_env_passes_in_standard_and_multi_turn_mode(world):
    check_env(ShopEnv(world), PERSONA_TASK, persona=False, interaction_mode="multi_turn")


def test_shop_client_passes_check_env(base_url):
    def run(skip):
        with ShopClient(base_url) as client:
            return check_env(client, PERSONA_TASK, skip=skip)

    _keeps_every_rule(run)


def test_async_shop_client_passes_check_env(base_url):
    def run(skip):
        async def main():
            async with AsyncShopClient(base_url) as client:
                return await check_env_async(client, PERSONA_TASK, skip=skip)

        return asyncio.run(main())

    _keeps_every_rule(run)
    # check_env would need its own event loop, which the client's connections do not belong to
    with pytest.raises(ShopSimError, match="AsyncShopClient is asynchronous: use `await check_env_async"):
        check_env(AsyncShopClient(base_url), PERSONA_TASK)


def test_gym_wrapper_passes_both_checkers(world):
    """The wrapper has Gymnasium's API: Gymnasium's own checker checks it, ours checks the env it wraps, and
    its observations and rewards are the wrapped env's."""
    gym_env = ShopGymEnv(world, split="test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a Gymnasium checker warning is a failure too
        gymnasium_check_env(gym_env, skip_render_check=True)
    check_env(gym_env.env, PERSONA_TASK)
    observation, info = gym_env.reset(options={"task_id": PERSONA_TASK})
    reference = ShopEnv(world).reset(PERSONA_TASK)
    assert observation == reference["observation"] and info["observation_state"] == reference["observation_state"]
    assert info["tools"] == gym_env.env.tools()


# ------------------------------------------------------------------ a broken environment must fail


class _Broken:
    """A ShopEnv with one rule broken at a time, to show the checker names the rule."""

    def __init__(self, env: ShopEnv, fault: str) -> None:
        self.env, self.fault = env, fault

    def reset(self, task_id, persona=None, interaction_mode="single_turn", *, include_private_goal=False):
        result = self.env.reset(task_id, persona, interaction_mode, include_private_goal=include_private_goal)
        if self.fault == "extra-key":
            result["lease_id"] = "x"
        return result

    def step(self, action):
        result = self.env.step(action)
        if self.fault == "nondeterministic":
            result["observation"] += f" {id(result)}"
        return result

    def terminate(self, reason="action_limit"):
        result = self.env.terminate(reason)
        if self.fault == "terminate-not-done":
            result["done"] = False
        return result

    def tools(self):
        tools = self.env.tools()
        if self.fault == "click-enum":
            for tool in tools:
                if tool["function"]["name"] == "click":
                    tool["function"]["parameters"]["properties"]["value"]["enum"].reverse()
        return tools

    def observation_state(self):
        return self.env.observation_state()

    @property
    def done(self):
        return self.env.done

    def close(self):
        self.env.close()


@pytest.mark.parametrize(("fault", "rule", "fragment"), [
    ("extra-key", "reset-keys", "unexpected ['lease_id']"),
    ("click-enum", "tools-consistent", "click enum must equal the page's clickables"),
    ("terminate-not-done", "terminate", "must give done/over True"),
    ("nondeterministic", "determinism", "differs in ['observation']"),
])
def test_checker_names_the_broken_rule(world, fault, rule, fragment):
    with pytest.raises(EnvCheckError) as caught:
        check_env(_Broken(ShopEnv(world), fault), PERSONA_TASK)
    assert rule in caught.value.rules and fragment in str(caught.value)
    assert f"[{rule}]" in str(caught.value) and "_Broken breaks" in str(caught.value)


def test_checker_refuses_non_environments_and_unknown_rules(world):
    with pytest.raises(EnvCheckError, match=r"\[interface\] missing members .*'terminate'"):
        check_env(ShopGymEnv(world), PERSONA_TASK)
    with pytest.raises(ShopSimError, match="unknown rule"):
        check_env(ShopEnv(world), PERSONA_TASK, skip=("no-such-rule",))


# ------------------------------------------------------------------ one episode, three paths

# (method, argument): a purchase episode (with an invalid action and an option) and a terminated one.
PURCHASE = [("reset", PERSONA_TASK), ("step", "click[nothing here]"), ("step", f"search[{QUERY}]"),
            ("step", "click[next >]"), ("step", f"click[{ASIN}]"), ("step", "click[buy now]"),
            ("step", f"click[{OPTION}]"), ("step", f"click[{OPTION}]"), ("step", "click[buy now]")]
TERMINATED = [("reset", STANDARD_TASK), ("step", f"search[{QUERY}]"), ("step", "click[back to search]"),
              ("terminate", "generation_length")]


def _play_sync(env, script):
    return [copy.deepcopy(getattr(env, method)(argument)) for method, argument in script]


async def _play_async(env, script):
    return [copy.deepcopy(await getattr(env, method)(argument)) for method, argument in script]


def _paths(world, base_url, script):
    in_process = _play_sync(ShopEnv(world), script)
    with ShopClient(base_url) as client:
        sync_http = _play_sync(client, script)

    async def main():
        async with AsyncShopClient(base_url) as client:
            return await _play_async(client, script)

    return {"ShopEnv": in_process, "ShopClient": sync_http, "AsyncShopClient": asyncio.run(main())}


def _split(results):
    """Each result without the per-path fields, and the per-path fields of the step results."""
    steps = [{key: value for key, value in result.items() if key not in PER_PATH} for result in results]
    return steps, [{key: result[key] for key in PER_PATH} for result in results[1:]]


def _same_everywhere(paths):
    reference, reference_idx = _split(paths["ShopEnv"])
    assert all(entry["idx"] == f"session-{paths['ShopEnv'][0]['idx']}" for entry in reference_idx)
    for name in ("ShopClient", "AsyncShopClient"):
        results, idx = _split(paths[name])
        assert len(results) == len(reference)
        for number, (got, want) in enumerate(zip(results, reference, strict=True)):
            assert got == want, f"{name}, call {number}: differs in {sorted(k for k in got.keys() | want.keys() if got.get(k) != want.get(k))}"
        assert all(entry["idx"].startswith("slot-") and entry["idx"].endswith(f"-{paths[name][0]['idx']}")
                   for entry in idx), idx


def test_per_path_fields_are_the_documented_ones():
    assert PER_PATH == PER_PATH_FIELDS


def test_same_purchase_episode_on_every_path(world, base_url):
    paths = _paths(world, base_url, PURCHASE)
    assert paths["ShopEnv"][-1]["done"] and paths["ShopEnv"][-1]["reward"] == 1.0  # the script really buys
    assert paths["ShopEnv"][1]["message"] == "Invalid action"
    _same_everywhere(paths)


def test_same_terminated_episode_on_every_path(world, base_url):
    _same_everywhere(_paths(world, base_url, TERMINATED))


def test_terminated_episode_differs_only_in_the_terminate_message(world, base_url):
    paths = _paths(world, base_url, TERMINATED)
    for results in paths.values():
        results[-1]["message"] = "<terminate message>"
    _same_everywhere(paths)


# Model text is read by the session's ``step`` (docs/contract.md#model-text), so every path reads it alike: the
# reference API's behaviour (its HTTP layer reads model text), now also in process.
MODEL_TEXT = [("reset", PERSONA_TASK), ("step", f"Thought: 先搜索。\nAction: search[{QUERY}]"),
              ("step", "Thought: 想一想\\nAction: click[824100258497]"),  # a literal backslash-n, as a model may write
              ("step", "Action: click[< prev]\nAction: click[back to search]"),  # two actions: rejected
              ("step", "  click[back to search]  ")]


def test_model_text_is_read_the_same_on_every_path(world, base_url):
    paths = _paths(world, base_url, MODEL_TEXT)
    feedback = [result["action_feedback"] for result in paths["ShopEnv"][1:]]
    assert [(f["action"], f["reason"]) for f in feedback] == [
        (f"search[{QUERY}]", "executed"), ("click[824100258497]", "executed"),
        ("Action: click[< prev]\nAction: click[back to search]", "multiple_actions_not_allowed"),
        ("click[back to search]", "executed")]
    _same_everywhere(paths)
