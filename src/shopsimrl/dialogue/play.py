"""A minimal in-process dialogue episode loop for built-in policies (the fast path of ``bench_dialogue.py``;
``shopsimrl eval --shopper rule`` runs the same policies through the agent runtime).

It gives a policy what the runtime gives it — the visible task (here the shopper's opening), the persona, the
observation text, the offered tools and the earlier turns — and turns its ``search`` / ``click`` /
``ask_user`` call into the canonical action. Used for the oracle solvability check and the heuristic figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..agent.policy import Policy, PolicyContext, PolicyError, Turn
from ..contract import ACTION_LIMIT
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
    reset = env.reset(task_id, persona=persona, shopper="rule", shopper_config=shopper_config)
    observation = reset["observation"]
    history: list[Turn] = []
    result: dict[str, Any] = {}
    while not env.done:
        context = PolicyContext(
            instruction=reset["shopper_opening"],
            observation=observation,
            tools=env.tools(),
            persona=reset["user_persona"],
            history=tuple(history),
            task_id=task_id,
            seed=seed,
        )
        try:
            action = policy.act(context).canonical
        except PolicyError:
            result = dict(env.terminate(ACTION_LIMIT))
            break
        result = dict(env.step(action))
        observation = result["observation"]
        history.append(Turn(action, observation))
    detail = result.get("reward_detail") or {}
    dialogue = result.get("dialogue") or {}
    return DialogueEpisode(
        task_id=task_id,
        reward=float(result.get("reward") or 0.0),
        success=bool(detail.get("r_success") == 1),
        steps=len(history),
        questions=int(dialogue.get("questions_asked", 0)),
        slots_revealed=int(dialogue.get("slots_revealed", 0)),
        slots_total=int(dialogue.get("slots_total", 0)),
        termination_reason=str(result.get("termination_reason") or ""),
        transcript=tuple(env.dialogue_transcript() or ()),
    )
