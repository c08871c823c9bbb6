"""The one episode loop (docs/contract.md#runtime-turn-rules): reset, turns until the episode ends, release.

The agent runtime (a chat model, trace records), the training rollout core (a sampler and its token ledger) and
the play loops (a built-in policy straight against the env) are this loop with different :class:`EpisodeHooks`.
The loop owns what they share, so it is decided once:

- the reset call, with the shopper's seed in dialogue mode;
- the turn limit is the environment's own (30 actions, 40 in dialogue mode, from the reset's
  ``interaction_mode``); a caller may only lower it. A repair turn counts without an environment action, so the
  loop ends the episode with ``terminate("action_limit")`` when the turns run out before the environment did;
- a page that offers no tool on an open episode is :class:`~shopsimrl.errors.RolloutError`;
- a ``terminate`` decision ends the episode with its reason; an ``act`` decision is stepped;
- any exception ends the episode with one error record (:func:`error_record`: stage, type, message, traceback);
  a failed LLM-shopper call names its own stage; the environment is always closed;
- one timing record, :class:`EpisodeStats` (model time is what the hooks time with :meth:`Episode.model`).

The loop is a coroutine; over a sync environment that is not threaded and a sync policy it never suspends, and
:func:`run_sync` runs it without an event loop (the play loops' fast path).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Awaitable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..contract import ACTION_LIMIT, GENERATION_LENGTH, MULTI_TURN, SINGLE_TURN
from ..env.tools import tools_for_state
from ..errors import RolloutError, ShopperCallError, ShopSimError, escaped
from ..versions import EPISODE_LIMITS
from .episode_env import AsyncEnv, EnvironmentFactory
from .turn import REPAIR, TERMINATE, TurnDecision

T = TypeVar("T")


@dataclass(frozen=True)
class EpisodeRequest:
    """Which episode to play: the reset's arguments and an optional cap below the environment's turn limit."""

    task_id: int
    persona: bool | None = None  # None: the task's own mode (persona iff it has one)
    interaction_mode: str = SINGLE_TURN
    shopper: str | None = None  # dialogue mode: "rule" or "llm" (implies multi_turn)
    shopper_seed: int | None = None  # the shopper's episode seed (dialogue mode only)
    max_turns: int | None = None  # None: the environment's own limit

    def turn_limit(self, reset: Mapping[str, Any] | None = None) -> int:
        """The environment's limit for the reset's interaction mode, lowered to ``max_turns`` when that is set."""
        mode = (reset or {}).get("interaction_mode") or (MULTI_TURN if self.shopper else self.interaction_mode)
        return turn_limit(str(mode), self.max_turns)


def turn_limit(interaction_mode: str, cap: int | None = None) -> int:
    """The turn limit of an episode in ``interaction_mode``: the environment's own (30; 40 in dialogue mode),
    lowered to ``cap`` when one is set; a cap never raises it. The loop and the episode shell both use it."""
    limit = EPISODE_LIMITS[interaction_mode]
    return limit if cap is None else min(limit, cap)


@dataclass
class EpisodeStats:
    """Time split over episodes (for the overhead benchmarks; never part of a trace or a trajectory)."""

    episodes: int = 0
    turns: int = 0
    total_s: float = 0.0
    model_s: float = 0.0  # the policy's own calls (model generate, sampler), as the hooks time them
    env_s: float = 0.0

    @property
    def core_s(self) -> float:
        """What the loop and its hooks cost beyond the model and the environment."""
        return self.total_s - self.model_s - self.env_s

    def add(self, other: EpisodeStats | Episode) -> None:
        self.episodes += other.episodes if isinstance(other, EpisodeStats) else 1
        self.turns += other.turns
        self.total_s += other.total_s
        self.model_s += other.model_s
        self.env_s += other.env_s


@dataclass
class Episode:
    """One episode as the loop runs it: what the hooks read and the outcome the caller gets back."""

    request: EpisodeRequest
    stage: str = "reset"
    reset: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    turns: int = 0
    total_s: float = 0.0
    model_s: float = 0.0
    env_s: float = 0.0
    completed: bool = False  # the episode ended and its hooks finished (a later cleanup error leaves it so)
    error: dict[str, Any] | None = None
    exception: Exception | None = None
    env: AsyncEnv | None = None

    async def model(self, call: Awaitable[T]) -> T:
        """Await a policy call and count its time as model time."""
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.model_s += time.perf_counter() - started

    async def environment(self, call: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.env_s += time.perf_counter() - started

    def fail(self, exc: Exception, stage: str | None = None) -> None:
        if self.error is None:
            self.error = error_record(stage or self.stage, exc)
            self.exception = exc


class EpisodeHooks(Protocol):
    """Who acts and what is recorded; the loop calls them in this order."""

    def start(self, episode: Episode, reset: dict[str, Any]) -> None:
        """After the reset (stage ``skill_selection``): build the prompt, the policy's view, the record."""

    async def turn(self, episode: Episode, index: int, tools: list[dict[str, Any]]) -> TurnDecision:
        """Turn ``index`` (stage ``model_step_<index>``) on a page offering ``tools``: the policy's decision."""

    def observe(self, episode: Episode, index: int, decision: TurnDecision, result: dict[str, Any]) -> None:
        """After the environment stepped an ``act`` decision."""

    async def finish(self, episode: Episode, final: dict[str, Any]) -> None:
        """After the episode ended (its terminal result): scoring, transcripts."""


def error_record(stage: str, exc: BaseException) -> dict[str, Any]:
    """The one shape of a failure in traces and trajectories: ``type`` is the boundary class (``escaped``), ``code``
    the error's code (None for an exception that is not a ShopSimError)."""
    kind, code = escaped(exc)
    return {"stage": stage, "type": kind, "code": code, "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


async def run_episode(environment: EnvironmentFactory, request: EpisodeRequest, hooks: EpisodeHooks, *,
                      stats: EpisodeStats | None = None) -> Episode:
    """Play one episode; never raises for an episode failure (``Episode.error`` says where it failed)."""
    clock = time.perf_counter
    t0 = clock()
    episode = Episode(request)
    env: AsyncEnv | None = None
    try:
        env = episode.env = environment.new()
        seed = {"shopper_seed": request.shopper_seed} if request.shopper and request.shopper_seed is not None else {}
        reset = await episode.environment(
            env.reset(request.task_id, request.persona, request.interaction_mode, request.shopper, **seed))
        episode.reset = reset
        episode.stage = "skill_selection"
        hooks.start(episode, reset)
        final: dict[str, Any] | None = None
        state = reset["observation_state"]
        for index in range(1, request.turn_limit(reset) + 1):
            episode.stage = f"model_step_{index}"
            tools = tools_for_state(state)
            if not tools:
                raise RolloutError("the page offers no tool but the episode is not done", code="no_tool_offered")
            decision = await hooks.turn(episode, index, tools)
            episode.turns += 1
            if decision.kind == TERMINATE:
                episode.stage = f"policy_termination_step_{index}"
                final = await episode.environment(env.terminate(decision.termination or GENERATION_LENGTH))
                break
            if decision.kind == REPAIR:
                continue
            episode.stage = f"environment_step_{index}"
            result = await episode.environment(env.step(decision.action or ""))  # "act" always carries one
            hooks.observe(episode, index, decision, result)
            if result.get("done"):
                final = result
                break
            state = result["observation_state"]
        if final is None:
            episode.stage = "action_limit_termination"
            final = await episode.environment(env.terminate(ACTION_LIMIT))
        episode.final = final
        episode.stage = "finish"
        await hooks.finish(episode, final)
        episode.completed = True
    except Exception as exc:
        # a failed LLM-shopper call (its k-th question; 0: the opening) names its own stage
        episode.fail(exc, exc.stage if isinstance(exc, ShopperCallError) else None)
    finally:
        if env is not None:
            try:
                await env.close()
            except Exception as exc:
                episode.fail(exc, "cleanup")
    episode.total_s = clock() - t0
    if stats is not None:
        stats.add(episode)
    return episode


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the loop over a sync, unthreaded env and a sync policy) in place."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    coroutine.close()
    raise ShopSimError("the episode awaited an event loop: run it with asyncio (a threaded or async environment)")
