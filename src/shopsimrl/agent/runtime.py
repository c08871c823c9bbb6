"""The agent runtime: one episode as a chat between a model and the environment (docs/contract.md#runtime-prompt, #runtime-turn-rules).

The episode is the one loop's (:mod:`.episode`: reset, the environment's turn limit, termination, errors by
stage, the environment always released); the runtime's hooks (:class:`ChatTurns`) make it a chat: a system
message (rules, persona line, optional skill block) and the first user message, then each turn the tools of the
current page, one model call and strict validation. A protocol error gets a repair turn (feedback JSON, same
page, no environment action, the turn counts); a valid call becomes the canonical action, and the new
observation comes back as a ``tool`` message. A cut-off generation ends the episode with
``terminate("generation_length")``, and so does a next prompt that would not fit the episode's context budget
(the context policy of :mod:`.context`, estimated from the messages: the model is not called, the episode is
scored and the trace's ``context`` block says ``context_ended``). The result is the trace record
(``shopsimrl-episode-v4``).

The environments the runtime plays on (:class:`InProcessEnvironment`, :class:`ServiceEnvironment`,
:func:`as_async_env`) are defined in :mod:`.episode_env`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from ..contract import ASK_USER_TOOL, GENERATION_LENGTH, MULTI_TURN, SINGLE_TURN, action_argument
from ..versions import TRACE_SCHEMA_VERSION
from .context import (
    DEFAULT_CONTEXT_BUDGET,
    DEFAULT_CONTEXT_RESERVE,
    MEASURE_ESTIMATE,
    context_exceeded,
    context_record,
    estimate_tokens,
)
from .episode import Episode, EpisodeRequest, EpisodeStats, error_record, run_episode
from .episode_env import AsyncEnv as AsyncEnv
from .episode_env import EnvironmentFactory as EnvironmentFactory
from .episode_env import EnvironmentSession as EnvironmentSession
from .episode_env import InProcessEnvironment as InProcessEnvironment
from .episode_env import ServiceEnvironment as ServiceEnvironment
from .episode_env import as_async_env as as_async_env
from .prompt import SYSTEM_PROMPT, first_user_message, system_message
from .skills import SkillBank, render_skills
from .turn import REPAIR, TERMINATE, TurnDecision, decide_turn, observation_message
from .validation import ModelOutput

ACTION_PROTOCOL = "openai-function-tools-repair-v3"
HIDDEN_RESET_FIELDS = ("env_idx", "lease_id", "private_task_instruction", "goal_options", "reason_key")
LEASE_FIELDS = ("env_idx", "lease_id")


class ModelBackend(Protocol):
    model_name: str

    def identity(self) -> dict[str, Any]: ...

    async def generate(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
        seed: int = 0, task_id: int | None = None,
    ) -> ModelOutput: ...

    async def close(self) -> None: ...


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
    max_steps: int | None = None  # None: the environment's own limit (30; 40 in dialogue mode); lower caps it
    persona: bool | None = None  # None: each task in its own mode (persona iff it has one)
    interaction_mode: str = SINGLE_TURN
    prompt: str = SYSTEM_PROMPT
    shopper: str | None = None  # dialogue mode: "rule" or "llm"; None: the reference single-agent episode
    # the episode's context budget (the context policy, :mod:`.context`), in estimated tokens; None: no budget
    context_budget: int | None = DEFAULT_CONTEXT_BUDGET
    context_reserve: int = DEFAULT_CONTEXT_RESERVE

    @property
    def turn_limit(self) -> int:
        return self.request(0).turn_limit()

    def request(self, task_id: int, seed: int = 0) -> EpisodeRequest:
        """The episode loop's request; the shopper (dialogue mode) is seeded with the episode seed."""
        return EpisodeRequest(task_id, self.persona, MULTI_TURN if self.shopper else self.interaction_mode,
                              self.shopper, seed if self.shopper else None, self.max_steps)

    def context(self, *, ended: bool, prompt_tokens: int | None = None, turn: int | None = None) -> dict[str, Any]:
        """The trace's ``context`` block under this budget (the measure is the runtime's estimate)."""
        return context_record(self.context_budget, self.context_reserve, MEASURE_ESTIMATE, ended=ended,
                              prompt_tokens=prompt_tokens, turn=turn)

    def identity(self) -> dict[str, Any]:
        context = {key: value for key, value in self.context(ended=False).items() if key != "context_ended"}
        out: dict[str, Any] = {"max_steps": self.turn_limit, "action_protocol": ACTION_PROTOCOL, **context}
        if self.shopper is not None:  # absent otherwise, so single-turn plan fingerprints stay as they were
            out["shopper"] = self.shopper
        return out


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _without(payload: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in keys}


def _record(job: EpisodeJob, provenance: Mapping[str, Any], started: str) -> dict[str, Any]:
    return {
        "schema_version": TRACE_SCHEMA_VERSION, "episode_id": job.episode_id, "status": "failed",
        "job": job.record(), "provenance": dict(provenance), "started_at": started, "ended_at": None,
        "duration_ms": None, "reset": None, "selected_skills": [], "conversation": [], "steps": [],
        "final": None, "error": None,
    }


class ChatTurns:
    """The runtime's hooks: the chat prompt, one model call per turn through the turn rules, the trace record."""

    def __init__(self, model: ModelBackend, config: RuntimeConfig, skills: SkillBank | None, job: EpisodeJob,
                 record: dict[str, Any]) -> None:
        self.model, self.config, self.skills, self.job, self.record = model, config, skills, job, record
        self.messages: list[dict[str, Any]] = record["conversation"]
        self.steps: list[dict[str, Any]] = record["steps"]
        self.shown = self.page = ""
        record["context"] = config.context(ended=False)

    def start(self, episode: Episode, reset: dict[str, Any]) -> None:
        self.record["reset"] = _without(reset, HIDDEN_RESET_FIELDS)
        selected = self.skills.select(self.job.task_id) if self.skills is not None else []
        self.record["selected_skills"] = [skill.record() for skill in selected]
        persona = reset.get("user_persona") or {}
        self.messages.append({"role": "system",
                              "content": system_message(persona, render_skills(selected), self.config.prompt)})
        # dialogue mode: the instruction is withheld and the shopper's opening is the task the agent sees
        visible = reset.get("shopper_opening") if self.config.shopper is not None else reset["task_instruction"]
        self.messages.append({"role": "user", "content": first_user_message(str(visible or ""), reset["observation"])})
        self.shown, self.page = self.messages[1]["content"], reset["observation"]

    async def turn(self, episode: Episode, index: int, tools: list[dict[str, Any]]) -> TurnDecision:
        budget = self.config.context_budget
        if budget is not None:
            prompt_tokens = estimate_tokens(self.messages, tools)
            if context_exceeded(prompt_tokens, budget, self.config.context_reserve):
                self.record["context"] = self.config.context(ended=True, prompt_tokens=prompt_tokens, turn=index)
                return TurnDecision(TERMINATE, termination=GENERATION_LENGTH)
        out = await episode.model(self.model.generate(self.messages, tools, seed=self.job.seed + index - 1,
                                                      task_id=self.job.task_id))
        step: dict[str, Any] = {"step_index": index, "observation": self.shown, "tools": tools,
                                "model": out.record(), "action": None, "environment": None}
        self.steps.append(step)
        decision = decide_turn(out, tools)
        if decision.kind == TERMINATE:
            step["policy_failure"] = out.policy_failure
        elif decision.kind == REPAIR:
            step["protocol_error"], step["protocol_feedback"] = out.protocol_error, decision.feedback
            self.messages.extend(decision.messages)
            self.shown = self.page
        else:
            step["action"] = decision.action
            self.messages.extend(decision.messages)
        return decision

    def observe(self, episode: Episode, index: int, decision: TurnDecision, result: dict[str, Any]) -> None:
        step = self.steps[-1]
        step["environment"] = result = _without(result, LEASE_FIELDS)
        question = action_argument(decision.action or "", ASK_USER_TOOL)
        if question is not None:
            feedback = result.get("action_feedback") or {}
            step["dialogue"] = {"question": question, "reply": result.get("shopper_reply"),
                                "valid": bool(feedback.get("valid"))}
        self.messages.append(observation_message(decision, result["observation"]))
        self.shown = self.page = result["observation"]

    async def finish(self, episode: Episode, final: dict[str, Any]) -> None:
        self.record["final"] = _without(final, LEASE_FIELDS)
        if self.config.shopper is not None:
            episode.stage = "dialogue_transcript"
            assert episode.env is not None and episode.reset is not None
            self.record["dialogue"] = await _dialogue_record(episode.env, episode.reset, self.steps)


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
        self.stats = EpisodeStats()

    async def run(self, job: EpisodeJob) -> dict[str, Any]:
        """One episode → its trace record (``shopsimrl-episode-v4``); never raises for episode failures."""
        record = _record(job, self.provenance, utc_now())
        hooks = ChatTurns(self.model, self.config, self.skills, job, record)
        episode = await run_episode(self.environment, self.config.request(job.task_id, job.seed), hooks,
                                    stats=self.stats)
        record["status"] = "completed" if episode.completed else "failed"
        record["error"] = episode.error
        record["ended_at"] = utc_now()
        record["duration_ms"] = round(episode.total_s * 1000, 3)
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
    return {**_record(job, provenance, now), "ended_at": now, "error": error_record(stage, exc)}
