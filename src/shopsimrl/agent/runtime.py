"""The agent runtime: one episode as a chat between a model and the environment (docs/contract.md#runtime-prompt, #runtime-turn-rules).

``reset`` → system message (rules, persona line, optional skill block) and the first user message → up to
``max_steps`` model turns, each with the tools of the current page, one model call and strict validation. A
protocol error gets a repair turn (feedback JSON, same page, no environment action, the turn counts); a valid
call becomes the canonical action, and the new observation comes back as a ``tool`` message. A cut-off
generation ends the episode with ``terminate("generation_length")``, running out of turns with
``terminate("action_limit")``. Every exception is caught and recorded with the stage it happened in; the
environment is always released.

The runtime works over an asynchronous environment interface; :func:`as_async_env` adapts the in-process
``ShopEnv`` (directly or in a worker thread) and the service clients (``ShopClient``/``AsyncShopClient``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol, Union

from ..contract import ACTION_LIMIT, ASK_USER_TOOL, SINGLE_TURN, action_argument
from ..env.interface import AsyncShopEnvironment, ShopEnvironment
from ..env.tools import tools_for_state
from ..errors import ShopperCallError, ShopSimError
from ..versions import EPISODE_LIMITS, TRACE_SCHEMA_VERSION
from .prompt import SYSTEM_PROMPT, first_user_message, system_message
from .skills import SkillBank, render_skills
from .turn import REPAIR, TERMINATE, decide_turn, observation_message
from .validation import ModelOutput

if TYPE_CHECKING:
    from ..dialogue.llm_shopper import ShopperEndpoint
    from ..env.shop_env import ShopEnv
    from ..server.client import AsyncShopClient, ShopClient

ACTION_PROTOCOL = "openai-function-tools-repair-v3"
HIDDEN_RESET_FIELDS = ("env_idx", "lease_id", "private_task_instruction", "goal_options", "reason_key")
LEASE_FIELDS = ("env_idx", "lease_id")


class RuntimeFailure(ShopSimError):
    """A state the turn loop cannot continue from (e.g. a page that offers no tool)."""


class AsyncEnv(Protocol):
    async def reset(
        self, task_id: int, persona: bool | None, interaction_mode: str, shopper: str | None = None,
        *, shopper_seed: int | None = None,
    ) -> dict[str, Any]: ...
    async def step(self, action: str) -> dict[str, Any]: ...
    async def terminate(self, reason: str) -> dict[str, Any]: ...
    async def close(self) -> None: ...


class ModelBackend(Protocol):
    model_name: str

    def identity(self) -> dict[str, Any]: ...

    async def generate(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
        seed: int = 0, task_id: int | None = None,
    ) -> ModelOutput: ...

    async def close(self) -> None: ...


EnvironmentSession = Union["ShopEnv", "ShopClient", "AsyncShopClient", ShopEnvironment, AsyncShopEnvironment]
"""What the runtime plays on: the package's three sessions or any implementation of the environment interface
(env/interface.py; the package's own return plain dicts of the same shape as the interface's TypedDicts)."""


class _Adapter:
    """Makes a sync (``ShopEnv``, ``ShopClient``) or async (``AsyncShopClient``) environment awaitable: the async
    interface is the one whose ``step`` is a coroutine function (the two Protocols differ only there)."""

    def __init__(self, env: EnvironmentSession, *, threaded: bool = False) -> None:
        self.env = env
        self.threaded = threaded
        self.is_async = inspect.iscoroutinefunction(getattr(env, "step", None))

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.env, name)
        if self.is_async:
            return await method(*args, **kwargs)
        if self.threaded:
            return await asyncio.to_thread(method, *args, **kwargs)
        return method(*args, **kwargs)

    async def reset(
        self, task_id: int, persona: bool | None, interaction_mode: str, shopper: str | None = None,
        *, shopper_seed: int | None = None,
    ) -> dict[str, Any]:
        extra: dict[str, Any] = {"shopper": shopper} if shopper is not None else {}  # no shopper: the reference call
        if shopper_seed is not None:
            extra["shopper_seed"] = shopper_seed
        result: dict[str, Any] = await self._call("reset", task_id, persona=persona, interaction_mode=interaction_mode,
                                                  **extra)
        return result

    async def dialogue_transcript(self) -> list[dict[str, Any]] | None:
        """The shopper's private transcript (matched slots, noise), read after the episode on every path."""
        if getattr(self.env, "dialogue_transcript", None) is None:
            return None
        transcript: list[dict[str, Any]] | None = await self._call("dialogue_transcript")
        return transcript

    async def step(self, action: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("step", action)
        return result

    async def terminate(self, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("terminate", reason)
        return result

    async def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            await self._call("close")


def as_async_env(env: EnvironmentSession, *, threaded: bool = False) -> AsyncEnv:
    """Adapt any object with the ``ShopEnv`` interface (sync or async) to :class:`AsyncEnv`."""
    return _Adapter(env, threaded=threaded)


class EnvironmentFactory(Protocol):
    """Opens one environment session per episode and says what it is (provenance)."""

    def new(self) -> AsyncEnv: ...

    def identity(self) -> dict[str, Any]: ...


class InProcessEnvironment:
    """Sessions over a shared in-process ``ShopWorld`` (threaded: run env calls in worker threads).

    ``llm_shopper`` (a ``ShopperEndpoint``) serves ``shopper="llm"``; its calls block, so it implies threaded.
    """

    def __init__(self, world: Any, *, threaded: bool = False, llm_shopper: ShopperEndpoint | None = None) -> None:
        self.world = world
        self.llm_shopper = llm_shopper
        self.threaded = threaded or llm_shopper is not None

    def new(self) -> AsyncEnv:
        if self.llm_shopper is None:
            return as_async_env(self.world.new_env(), threaded=self.threaded)
        return as_async_env(self.world.new_env(llm_shopper=self.llm_shopper), threaded=self.threaded)

    def identity(self) -> dict[str, Any]:
        return {"adapter": "in-process", "base_url": None}


class ServiceEnvironment:
    """Sessions leased from a ``shopsimrl serve`` service through ``AsyncShopClient`` (one per episode)."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def new(self) -> AsyncEnv:
        from ..server.client import AsyncShopClient

        return as_async_env(AsyncShopClient(self.base_url, timeout=self.timeout))

    def identity(self) -> dict[str, Any]:
        return {"adapter": "http", "base_url": self.base_url}


@dataclass(frozen=True)
class EpisodeJob:
    task_id: int
    sample_id: int = 0
    seed: int = 0
    split: str = "test"

    @property
    def episode_id(self) -> str:
        return f"task-{self.task_id:06d}__sample-{self.sample_id:03d}"

    def record(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "sample_id": self.sample_id, "seed": self.seed, "split": self.split}


@dataclass(frozen=True)
class RuntimeConfig:
    max_steps: int = EPISODE_LIMITS[SINGLE_TURN]
    persona: bool | None = None  # None: each task in its own mode (persona iff it has one)
    interaction_mode: str = SINGLE_TURN
    prompt: str = SYSTEM_PROMPT
    shopper: str | None = None  # dialogue mode: "rule" or "llm"; None: the reference single-agent episode

    def identity(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_steps": self.max_steps, "action_protocol": ACTION_PROTOCOL}
        if self.shopper is not None:  # absent otherwise, so single-turn plan fingerprints stay as they were
            out["shopper"] = self.shopper
        return out


@dataclass
class RuntimeStats:
    """Time split of all episodes run so far (for the overhead benchmark; never written to traces)."""

    episodes: int = 0
    turns: int = 0
    total_s: float = 0.0
    model_s: float = 0.0
    env_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _without(payload: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in keys}


class AgentRuntime:
    """Runs episodes of one model against one environment factory; each ``run`` is independent."""

    def __init__(
        self, model: ModelBackend, environment: EnvironmentFactory, *, config: RuntimeConfig | None = None,
        skills: SkillBank | None = None, provenance: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.environment = environment
        self.config = config or RuntimeConfig()
        self.skills = skills
        self.provenance = dict(provenance) if provenance is not None else {}
        self.stats = RuntimeStats()

    async def run(self, job: EpisodeJob) -> dict[str, Any]:
        """One episode → its trace record (``shopsimrl-episode-v4``); never raises for episode failures."""
        clock = time.perf_counter
        started, t0 = utc_now(), clock()
        model_s = env_s = 0.0
        cfg = self.config
        steps: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []
        record: dict[str, Any] = {
            "schema_version": TRACE_SCHEMA_VERSION, "episode_id": job.episode_id, "status": "failed",
            "job": job.record(), "provenance": self.provenance, "started_at": started, "ended_at": None,
            "duration_ms": None, "reset": None, "selected_skills": [], "conversation": messages, "steps": steps,
            "final": None, "error": None,
        }
        stage = "reset"
        env: AsyncEnv | None = None
        try:
            env = self.environment.new()
            t = clock()
            if cfg.shopper == "llm":  # the LLM shopper is asked with the episode seed
                reset = await env.reset(job.task_id, cfg.persona, cfg.interaction_mode, cfg.shopper,
                                        shopper_seed=job.seed)
            else:
                reset = await env.reset(job.task_id, cfg.persona, cfg.interaction_mode, cfg.shopper)
            env_s += clock() - t
            record["reset"] = _without(reset, HIDDEN_RESET_FIELDS)
            stage = "skill_selection"
            selected = self.skills.select(job.task_id) if self.skills is not None else []
            record["selected_skills"] = [skill.record() for skill in selected]
            persona = reset.get("user_persona") or {}
            messages.append({"role": "system", "content": system_message(persona, render_skills(selected), cfg.prompt)})
            # dialogue mode: the instruction is withheld and the shopper's opening is the task the agent sees
            visible = reset.get("shopper_opening") if cfg.shopper is not None else reset["task_instruction"]
            messages.append({"role": "user", "content": first_user_message(str(visible or ""), reset["observation"])})
            shown, page, state = messages[1]["content"], reset["observation"], reset["observation_state"]
            final: dict[str, Any] | None = None
            for step_index in range(1, cfg.max_steps + 1):
                stage = f"model_step_{step_index}"
                tools = tools_for_state(state)
                if not tools:
                    raise RuntimeFailure("the page offers no tool but the episode is not done")
                t = clock()
                out = await self.model.generate(messages, tools, seed=job.seed + step_index - 1, task_id=job.task_id)
                model_s += clock() - t
                step: dict[str, Any] = {"step_index": step_index, "observation": shown, "tools": tools,
                                        "model": out.record(), "action": None, "environment": None}
                steps.append(step)
                decision = decide_turn(out, tools)
                if decision.kind == TERMINATE:
                    step["policy_failure"] = out.policy_failure
                    stage = f"policy_termination_step_{step_index}"
                    t = clock()
                    assert decision.termination is not None  # a terminate decision always names its reason
                    final = await env.terminate(decision.termination)
                    env_s += clock() - t
                    break
                if decision.kind == REPAIR:
                    step["protocol_error"], step["protocol_feedback"] = out.protocol_error, decision.feedback
                    messages.extend(decision.messages)
                    shown = page
                    continue
                action = decision.action or ""  # an "act" decision always carries its action
                step["action"] = action
                messages.extend(decision.messages)
                stage = f"environment_step_{step_index}"
                t = clock()
                result = _without(await env.step(action), LEASE_FIELDS)
                env_s += clock() - t
                step["environment"] = result
                question = action_argument(action, ASK_USER_TOOL)
                if question is not None:
                    feedback = result.get("action_feedback") or {}
                    step["dialogue"] = {"question": question, "reply": result.get("shopper_reply"),
                                        "valid": bool(feedback.get("valid"))}
                messages.append(observation_message(decision, result["observation"]))
                if result.get("done"):
                    final = result
                    break
                shown = page = result["observation"]
                state = result["observation_state"]
            if final is None:
                stage = "action_limit_termination"
                t = clock()
                final = await env.terminate(ACTION_LIMIT)
                env_s += clock() - t
            record["final"] = _without(final, LEASE_FIELDS)
            if cfg.shopper is not None:
                stage = "dialogue_transcript"
                record["dialogue"] = await _dialogue_record(env, reset, steps)
            record["status"] = "completed"
        except Exception as exc:
            if isinstance(exc, ShopperCallError):  # the LLM shopper failed on its k-th question (0: the opening)
                stage = exc.stage
            record["error"] = _error(stage, exc)
        finally:
            if env is not None:
                try:
                    await env.close()
                except Exception as exc:
                    if record["error"] is None:
                        record["error"] = _error("cleanup", exc)
        total = clock() - t0
        record["ended_at"] = utc_now()
        record["duration_ms"] = round(total * 1000, 3)
        stats = self.stats
        stats.episodes += 1
        stats.turns += len(steps)
        stats.total_s += total
        stats.model_s += model_s
        stats.env_s += env_s
        return record

    async def close(self) -> None:
        await self.model.close()


async def _dialogue_record(env: AsyncEnv, reset: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trace's ``dialogue`` block: the shopper, each question and reply, and (in-process) the matched slots.

    The transcript names private slots, so it is read after the episode ends (the environment's own rule, on
    every path) and never shown to the agent.
    """
    transcript = None
    getter = getattr(env, "dialogue_transcript", None)
    if getter is not None:
        transcript = await getter()
    turns = [dict(step["dialogue"], step_index=step["step_index"]) for step in steps if "dialogue" in step]
    return {"shopper": reset.get("shopper"), "shopper_version": reset.get("shopper_version"),
            "opening": reset.get("shopper_opening"), "turns": turns, "transcript": transcript}


def failure_record(job: EpisodeJob, provenance: Mapping[str, Any], stage: str, exc: BaseException) -> dict[str, Any]:
    """The record of an episode that failed outside ``AgentRuntime.run`` (e.g. its remote worker was lost)."""
    now = utc_now()
    return {
        "schema_version": TRACE_SCHEMA_VERSION, "episode_id": job.episode_id, "status": "failed",
        "job": job.record(), "provenance": dict(provenance), "started_at": now, "ended_at": now,
        "duration_ms": None, "reset": None, "selected_skills": [], "conversation": [], "steps": [],
        "final": None, "error": _error(stage, exc),
    }


def _error(stage: str, exc: BaseException) -> dict[str, Any]:
    return {"stage": stage, "type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}
