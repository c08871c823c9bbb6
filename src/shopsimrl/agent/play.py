"""Play one episode with a built-in policy straight against an environment (no chat messages).

This is the fast path used by catalog statistics and benchmarks: the one episode loop (:mod:`.episode`) with
:class:`PolicyTurns`, which give the policy the same :class:`PolicyContext` the runtime's chat gives it. A
built-in policy's action is always one valid call, so of the turn rules only the limit and termination apply.
Over an in-process ``ShopEnv`` the loop never suspends and runs without an event loop.

:func:`play_dialogue` plays a dialogue episode the same way (the fast path of ``bench_dialogue.py``; ``shopsimrl
eval --shopper rule`` runs the same policies through the agent runtime): the policy sees the shopper's opening as
its task, and its ``ask_user`` call becomes the canonical action like any other. Used for the oracle solvability
check and the heuristic figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract import MULTI_TURN
from ..dialogue.config import ShopperConfig
from ..env.shop_env import ShopEnv
from .episode import Episode, EpisodeRequest, run_episode, run_sync
from .episode_env import SingleEnvironment
from .policy import Policy, PolicyContext, Turn
from .turn import ACT, TurnDecision


class PolicyTurns:
    """The play loops' hooks: each turn the policy acts on the visible task, the observation and the history."""

    def __init__(self, policy: Policy, *, seed: int = 0) -> None:
        self.policy = policy
        self.seed = seed
        self.history: list[Turn] = []
        self.instruction = self.observation = ""
        self.persona: dict[str, Any] = {}

    def start(self, episode: Episode, reset: dict[str, Any]) -> None:
        # dialogue mode: the instruction is withheld and the shopper's opening is the task the policy sees
        shown = reset.get("shopper_opening") if episode.request.shopper else reset["task_instruction"]
        self.instruction = str(shown or "")
        self.persona = reset.get("user_persona") or {}
        self.observation = reset["observation"]

    async def turn(self, episode: Episode, index: int, tools: list[dict[str, Any]]) -> TurnDecision:
        context = PolicyContext(instruction=self.instruction, observation=self.observation, tools=tools,
                                persona=self.persona, history=tuple(self.history), task_id=episode.request.task_id,
                                seed=self.seed)
        return TurnDecision(ACT, action=self.policy.act(context).canonical)

    def observe(self, episode: Episode, index: int, decision: TurnDecision, result: dict[str, Any]) -> None:
        self.observation = result["observation"]
        self.history.append(Turn(decision.action or "", self.observation))

    async def finish(self, episode: Episode, final: dict[str, Any]) -> None:
        return None


def play(env: ShopEnv, policy: Policy, request: EpisodeRequest, *, seed: int = 0,
         reset_options: dict[str, Any] | None = None) -> tuple[Episode, PolicyTurns]:
    """Run the loop in place over ``env`` (kept open); a failure is raised as the exception it was."""
    hooks = PolicyTurns(policy, seed=seed)
    episode = run_sync(run_episode(SingleEnvironment(env, reset_options=reset_options), request, hooks))
    if episode.exception is not None:
        raise episode.exception
    return episode, hooks


@dataclass(frozen=True)
class EpisodeOutcome:
    task_id: int
    actions: tuple[str, ...]
    final: dict[str, Any]

    @property
    def success(self) -> bool:
        return bool(self.final.get("reward_detail", {}).get("r_success"))

    @property
    def reward(self) -> float:
        return float(self.final.get("reward", 0.0))


def play_episode(
    env: ShopEnv, policy: Policy, task_id: int, *, persona: bool | None = None, max_steps: int | None = None, seed: int = 0
) -> EpisodeOutcome:
    """Reset ``task_id``, let ``policy`` act until the episode ends (the env's limit, or ``max_steps`` if lower)."""
    episode, hooks = play(env, policy, EpisodeRequest(task_id, persona, max_turns=max_steps), seed=seed)
    assert episode.final is not None  # a completed episode always has its terminal result
    return EpisodeOutcome(task_id, tuple(turn.action for turn in hooks.history), episode.final)


@dataclass(frozen=True, slots=True)
class DialogueEpisode:
    """The outcome of one dialogue episode."""

    task_id: int
    reward: float
    success: bool
    steps: int
    questions: int
    slots_revealed: int
    slots_total: int
    termination_reason: str
    transcript: tuple[dict[str, Any], ...]


def play_dialogue(
    env: ShopEnv,
    task_id: int,
    policy: Policy,
    *,
    persona: bool | None = None,
    shopper_config: ShopperConfig | None = None,
    seed: int = 0,
) -> DialogueEpisode:
    """Run ``policy`` on one dialogue episode of ``task_id`` with the rule shopper until it ends."""
    request = EpisodeRequest(task_id, persona, MULTI_TURN, "rule")
    episode, hooks = play(env, policy, request, seed=seed, reset_options={"shopper_config": shopper_config})
    result = episode.final or {}
    detail = result.get("reward_detail") or {}
    dialogue = result.get("dialogue") or {}
    return DialogueEpisode(
        task_id=task_id,
        reward=float(result.get("reward") or 0.0),
        success=bool(detail.get("r_success") == 1),
        steps=len(hooks.history),
        questions=int(dialogue.get("questions_asked", 0)),
        slots_revealed=int(dialogue.get("slots_revealed", 0)),
        slots_total=int(dialogue.get("slots_total", 0)),
        termination_reason=str(result.get("termination_reason") or ""),
        transcript=tuple(env.dialogue_transcript() or ()),
    )
