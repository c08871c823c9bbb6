"""Play one episode with a built-in policy straight against an environment (no chat messages).

This is the fast path used by catalog statistics and benchmarks; the agent runtime's turn loop does the
same through the chat protocol. Both give a policy the same :class:`PolicyContext`. A built-in policy's
action is always one valid call, so of the turn rules (:mod:`shopsimrl.agent.turn`) only termination applies
here, with the same reason constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract import ACTION_LIMIT, SINGLE_TURN
from ..env.shop_env import ShopEnv
from ..versions import EPISODE_LIMITS
from .policy import Policy, PolicyContext, Turn


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
    """Reset ``task_id``, let ``policy`` act until the episode ends or ``max_steps`` (default 30) pass."""
    limit = max_steps or EPISODE_LIMITS[SINGLE_TURN]
    reset = env.reset(task_id, persona=persona)
    instruction = reset["task_instruction"]
    persona_doc = reset.get("user_persona") or {}
    observation = reset["observation"]
    history: list[Turn] = []
    final: dict[str, Any] | None = None
    for _ in range(limit):
        context = PolicyContext(
            instruction=instruction, observation=observation, tools=env.tools(), persona=persona_doc,
            history=tuple(history), task_id=task_id, seed=seed,
        )
        action = policy.act(context).canonical
        result: dict[str, Any] = dict(env.step(action))
        observation = result["observation"]
        history.append(Turn(action, observation))
        if result["done"]:
            final = result
            break
    if final is None:
        final = dict(env.terminate(ACTION_LIMIT))
    return EpisodeOutcome(task_id, tuple(turn.action for turn in history), final)
