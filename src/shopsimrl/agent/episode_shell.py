"""The episode shell: the episode loop's rules for an episode that a trainer or a hub drives, held once.

TRL's tool loop (``train/trl_environment.py``), the verifiers tool server (``environments/shopsim_env``'s
``toolset.py``) and OpenEnv's environment and harness (``openenv/``) cannot run
:func:`~shopsimrl.agent.episode.run_episode`: their caller sends one tool call at a time. Each wraps its session
in an :class:`EpisodeShell`, which applies what the loop decides for its own episodes, the way Gymnasium's
``TimeLimit`` and ``OrderEnforcing`` wrappers each hold one rule for every environment they wrap:

- it counts the steps and applies the loop's turn limit (:func:`~shopsimrl.agent.episode.turn_limit`: the
  environment's own, 30 or 40 in dialogue mode; a cap only lowers it), ending the episode at the limit with
  ``terminate("action_limit")``, as the loop does;
- it records the end once (the terminal result: done, reward, termination reason);
- a tool call after the end gets one answer on every path, :data:`EPISODE_OVER` (:meth:`EpisodeShell.call`);
  a plain :meth:`EpisodeShell.step` after the end is the engine's own ``EpisodeStateError`` (``episode_terminated``);
- the reward leaves it as the public fields only (:func:`public_reward`): the goal stays in the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..contract import ACTION_LIMIT, SINGLE_TURN
from ..errors import EpisodeStateError
from ..versions import REPORTED_METRICS
from .episode import turn_limit

EPISODE_OVER = "本回合已结束，不能再调用工具。"  # the one answer to a tool call after the end


class StepEnv(Protocol):
    """The part of a ``ShopEnv`` session the shell drives (after its reset)."""

    def step(self, action: str) -> Any: ...

    def terminate(self, reason: str = ACTION_LIMIT) -> Any: ...


def public_reward(detail: Mapping[str, Any] | None) -> dict[str, Any]:
    """The reward components a trainer may see (``r_*``, ``price_verifiable``, ``target_asin_match``)."""
    return {key: detail[key] for key in REPORTED_METRICS if key in detail} if detail else {}


class EpisodeShell:
    """One externally driven episode over ``env``, started by ``reset`` (the reset's result)."""

    def __init__(self, env: StepEnv | None, reset: Mapping[str, Any], *, max_steps: int | None = None) -> None:
        self.env = env
        self.limit = turn_limit(str(reset["interaction_mode"]), max_steps)
        self.steps = 0
        self.final: Mapping[str, Any] | None = None

    @classmethod
    def ended(cls) -> EpisodeShell:
        """A shell whose episode is over and gone (a tool server that dropped the session at its end)."""
        shell = cls(None, {"interaction_mode": SINGLE_TURN})
        shell.final = {}
        return shell

    @property
    def done(self) -> bool:
        return self.final is not None

    def _env(self) -> StepEnv:
        if self.env is None:
            raise EpisodeStateError("the episode's session is gone", code="no_active_episode")
        return self.env

    def _at_limit(self) -> None:
        if self.final is None and self.steps >= self.limit:  # a cap of 0: the loop plays no turn at all
            self.final = self._env().terminate(ACTION_LIMIT)

    def step(self, action: str) -> Mapping[str, Any]:
        """Step the environment once: its result. The step that reaches the limit also ends the episode."""
        self._at_limit()
        env = self._env()
        result: Mapping[str, Any] = env.step(action)  # after the end: the engine's EpisodeStateError
        self.steps += 1
        if result.get("done"):
            self.final = result
        elif self.steps >= self.limit:
            self.final = env.terminate(ACTION_LIMIT)
        return result

    def call(self, action: str) -> str:
        """A tool call: the page text it leads to, or :data:`EPISODE_OVER` once the episode is over."""
        self._at_limit()
        if self.done:
            return EPISODE_OVER
        return str(self.step(action)["observation"])

    def terminate(self, reason: str = ACTION_LIMIT) -> Mapping[str, Any]:
        """End the episode for the runner (``generation_length`` / ``action_limit``): the terminal result."""
        self.final = self._env().terminate(reason)
        return self.final

    def finish(self) -> Mapping[str, Any]:
        """The terminal result, ending an unfinished episode with ``action_limit`` first (a trainer's reward call)."""
        if self.final is None:
            self.final = self._env().terminate(ACTION_LIMIT)
        return self.final

    @property
    def reward(self) -> float:
        """The terminal reward (r_strict; 0.0 while the episode runs)."""
        return float(self.final["reward"]) if self.final else 0.0

    @property
    def termination_reason(self) -> str | None:
        return self.final.get("termination_reason") if self.final else None

    @property
    def public(self) -> dict[str, Any]:
        """The end's public reward components (empty while the episode runs)."""
        return public_reward(self.final.get("reward_detail")) if self.final else {}

    def outcome(self) -> dict[str, Any]:
        """The end as a trainer records it: ``done``, ``termination_reason``, ``reward``, ``reward_detail``."""
        return {"done": self.done, "termination_reason": self.termination_reason, "reward": self.reward,
                "reward_detail": self.public}
