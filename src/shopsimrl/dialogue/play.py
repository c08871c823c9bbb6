"""A dialogue episode with a built-in policy in process (the fast path of ``bench_dialogue.py``;
``shopsimrl eval --shopper rule`` runs the same policies through the agent runtime).

It is the one episode loop with the play hooks (:mod:`shopsimrl.agent.play`): the policy sees what the runtime
gives it — the visible task (here the shopper's opening), the persona, the observation text, the offered tools and
the earlier turns — and its ``search`` / ``click`` / ``ask_user`` call becomes the canonical action. Used for the
oracle solvability check and the heuristic figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..agent.episode import EpisodeRequest
from ..agent.play import play
from ..agent.policy import Policy
from ..contract import MULTI_TURN
from ..env.shop_env import ShopEnv
from .config import ShopperConfig


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
