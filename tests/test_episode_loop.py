"""The one episode loop (agent/episode.py) under its three sets of hooks: the agent runtime (chat model), the
rollout core (sampler and token ledger) and the play loops (built-in policy).

Each rule the loop owns is checked through every loop: the turn limit is the environment's own (30, or 40 in
dialogue mode), a page without a tool is one error class, error records have one shape, the shopper gets the
episode seed, and timing is one record.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from error_kinds import raises_kind
from shopsimrl.agent import (
    AgentRuntime,
    EpisodeJob,
    EpisodeStats,
    InProcessEnvironment,
    RuntimeConfig,
    as_async_env,
)
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel
from shopsimrl.agent.episode import EpisodeRequest, run_sync
from shopsimrl.agent.play import play_episode
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.policy import PolicyAction
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.errors import RolloutError, ShopSimError
from shopsimrl.train.rollout import COMPLETED, Generation, RolloutConfig, RolloutContext, run_rollout
from toy import PolicyGenerate, ToyChatTokenizer, tool_call_text

ERROR_KEYS = {"stage", "type", "code", "message", "traceback"}


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


class Recording(InProcessEnvironment):
    """The in-process environment, recording each reset's keyword arguments and each terminate reason;
    ``stuck=True`` answers every step with a page that offers no tool although the episode is open."""

    def __init__(self, world: ShopWorld, *, stuck: bool = False) -> None:
        super().__init__(world)
        self.resets: list[dict[str, Any]] = []
        self.terminations: list[str] = []
        self.stuck = stuck

    def new(self) -> Any:
        return as_async_env(self.session())

    def session(self) -> Any:
        env, outer = self.world.new_env(shoppers=shopper_registry()), self
        dead = self.world.new_env(shoppers=shopper_registry())
        dead.reset(0)
        no_tool_page = dead.terminate("action_limit")["observation_state"]

        class Session:
            def reset(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
                outer.resets.append(kwargs)
                return env.reset(*args, **kwargs)

            def step(self, action: str) -> dict[str, Any]:
                result = env.step(action)
                return {**result, "done": False, "observation_state": no_tool_page} if outer.stuck else result

            def terminate(self, reason: str) -> dict[str, Any]:
                outer.terminations.append(reason)
                return env.terminate(reason)

            def close(self) -> None:
                env.close()

            def dialogue_transcript(self) -> Any:
                return env.dialogue_transcript()

        return Session()


class Searcher:
    """A built-in-policy stand-in that searches and goes back forever (valid actions): only a limit ends it."""

    name = "searcher"

    def act(self, context: Any) -> PolicyAction:
        return PolicyAction.search("冰箱") if context.search_offered else PolicyAction.click("back to search")


def sampler(tokenizer: ToyChatTokenizer, text: str | None = None) -> Any:
    """Samples ``text`` every turn; None: the searcher's valid action on the page the prompt shows."""

    def generate(prompt_ids: list[int]) -> Generation:
        tools = tokenizer.conversation_for(prompt_ids)[1]
        valid = tool_call_text("search", {"query": "冰箱"}) if any(
            t["function"]["name"] == "search" for t in tools) else tool_call_text("click", {"value": "back to search"})
        ids = [*tokenizer.encode(text if text is not None else valid), tokenizer.eos_token_id]
        return Generation(ids, [-0.5] * len(ids), "stop")

    return generate


def runtime_episode(environment: Recording, model: Any, config: RuntimeConfig, seed: int = 0) -> dict[str, Any]:
    return asyncio.run(AgentRuntime(model, environment, config=config).run(EpisodeJob(0, seed=seed)))


@pytest.mark.parametrize("shopper", [None, "rule"])
def test_the_turn_limit_is_the_environments_in_every_loop(world: ShopWorld, shopper: str | None) -> None:
    limit = 40 if shopper else 30
    environment = Recording(world)
    record = runtime_episode(environment, BuiltinPolicyModel(Searcher()), RuntimeConfig(shopper=shopper))
    assert len(record["steps"]) == limit and record["final"]["termination_reason"] == "action_limit"
    assert environment.terminations == []  # the environment ended the episode itself at its own limit
    assert RuntimeConfig(shopper=shopper).identity()["max_steps"] == limit

    tokenizer = ToyChatTokenizer()
    context = RolloutContext.for_task(0, shopper)
    trajectory = asyncio.run(run_rollout(context, tokenizer, sampler(tokenizer), environment,
                                         config=RolloutConfig(episode_tools=False)))
    assert trajectory.status == COMPLETED and len(trajectory.steps) == limit
    assert trajectory.metadata["termination_reason"] == "action_limit" and environment.terminations == []

    if shopper is None:
        outcome = play_episode(environment.session(), Searcher(), 0)
        assert len(outcome.actions) == limit and outcome.final["termination_reason"] == "action_limit"
        assert len(play_episode(world.new_env(shoppers=shopper_registry()), Searcher(), 0, max_steps=3).actions) == 3  # a cap only lowers it


def test_repair_turns_count_so_the_loop_ends_what_the_environment_never_saw(world: ShopWorld) -> None:
    environment = Recording(world)
    tokenizer = ToyChatTokenizer()
    mixed = "我来搜索。" + tool_call_text("search", {"query": "冰箱"})  # a protocol error every turn
    trajectory = asyncio.run(run_rollout(RolloutContext(0), tokenizer, sampler(tokenizer, mixed), environment))
    assert len(trajectory.steps) == 30 and all(step["protocol_error"] for step in trajectory.steps)
    assert environment.terminations == ["action_limit"]
    capped = asyncio.run(run_rollout(RolloutContext(0), tokenizer, sampler(tokenizer, mixed), environment,
                                     config=RolloutConfig(max_steps=50)))
    assert len(capped.steps) == 30  # a cap above the environment's limit does not raise it


def test_a_page_without_a_tool_is_one_error_class_with_one_record_shape(world: ShopWorld) -> None:
    record = runtime_episode(Recording(world, stuck=True), BuiltinPolicyModel(Searcher()), RuntimeConfig())
    assert record["status"] == "failed" and set(record["error"]) == ERROR_KEYS
    assert record["error"]["type"] == "RolloutError" and record["error"]["stage"] == "model_step_2"
    assert record["error"]["code"] == "no_tool_offered"

    tokenizer = ToyChatTokenizer()
    generate = PolicyGenerate(tokenizer, make_policy("heuristic", world))
    trajectory = asyncio.run(run_rollout(RolloutContext(0), tokenizer, generate, Recording(world, stuck=True)))
    assert trajectory.error is not None and set(trajectory.error) == ERROR_KEYS
    assert (trajectory.error["type"], trajectory.error["stage"]) == ("RolloutError", "model_step_2")

    with raises_kind(RolloutError, "no_tool_offered"):
        play_episode(Recording(world, stuck=True).session(), Searcher(), 0)


def test_the_shopper_gets_the_episode_seed_in_every_loop(world: ShopWorld) -> None:
    environment = Recording(world)
    runtime_episode(environment, BuiltinPolicyModel(Searcher()), RuntimeConfig(shopper="rule", max_steps=1), seed=7)
    runtime_episode(environment, BuiltinPolicyModel(Searcher()), RuntimeConfig(max_steps=1), seed=7)
    tokenizer = ToyChatTokenizer()
    generate = sampler(tokenizer, tool_call_text("search", {"query": "冰箱"}))
    asyncio.run(run_rollout(RolloutContext.for_task(0, "rule", seed=9), tokenizer, generate, environment,
                            config=RolloutConfig(max_steps=1)))
    seeds = [kwargs.get("shopper_seed") for kwargs in environment.resets]
    assert seeds == [7, None, 9]  # no shopper, no shopper seed (the reference reset)


def test_timing_is_one_record_for_every_loop(world: ShopWorld) -> None:
    stats = EpisodeStats()
    runtime = AgentRuntime(BuiltinPolicyModel(Searcher()), Recording(world), config=RuntimeConfig(max_steps=2))
    asyncio.run(runtime.run(EpisodeJob(0)))
    tokenizer = ToyChatTokenizer()
    asyncio.run(run_rollout(RolloutContext(0), tokenizer, sampler(tokenizer, tool_call_text("search", {"query": "x"})),
                            Recording(world), config=RolloutConfig(max_steps=3), timer=stats))
    assert type(runtime.stats) is type(stats)
    assert (runtime.stats.episodes, runtime.stats.turns, stats.episodes, stats.turns) == (1, 2, 1, 3)
    stats.add(runtime.stats)
    assert (stats.episodes, stats.turns) == (2, 5) and stats.total_s >= stats.model_s + stats.env_s >= 0


def test_the_loop_runs_in_place_only_when_nothing_suspends(world: ShopWorld) -> None:
    async def suspends() -> None:
        await asyncio.sleep(0)

    with pytest.raises(ShopSimError, match="event loop"):
        run_sync(suspends())
    assert EpisodeRequest(0, max_turns=99).turn_limit() == 30
    assert EpisodeRequest(0, shopper="rule").turn_limit({"interaction_mode": "multi_turn"}) == 40


def test_threaded_steps_run_in_the_core_bounded_pool_unless_they_wait_on_io() -> None:
    """CPU-bound in-process steps share a pool of at most the cores (more threads only take the GIL from the
    event loop); steps that wait on an LLM shopper's HTTP calls keep asyncio's wider default pool."""
    import threading

    from shopsimrl.agent.episode_env import STEP_THREADS, as_async_env

    class Where:
        def __init__(self) -> None:
            self.names: list[str] = []

        def step(self, action: str) -> dict[str, Any]:
            self.names.append(threading.current_thread().name)
            return {}

    async def play(blocking_io: bool) -> list[str]:
        env = Where()
        adapted = as_async_env(env, threaded=True, blocking_io=blocking_io)  # type: ignore[arg-type]
        await asyncio.gather(*(adapted.step("search[x]") for _ in range(16)))
        return env.names

    bounded = asyncio.run(play(False))
    assert all(name.startswith("shopsim-step") for name in bounded)
    assert len(set(bounded)) <= STEP_THREADS
    assert not any(name.startswith("shopsim-step") for name in asyncio.run(play(True)))
