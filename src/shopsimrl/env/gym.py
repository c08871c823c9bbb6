"""Gymnasium wrapper: the same episode as ``ShopEnv`` behind ``gymnasium.Env``.

Observations are the rendered ``shopping-observation-v7`` text and actions are canonical action strings;
``reset(options={"task_id": …, "persona": …})`` chooses the task (else a seeded choice from the split);
``shopper="rule"`` (or ``options["shopper"]``) with ``shoppers=shopper_registry()`` (``shopsimrl.dialogue.
registry``; ``"llm"`` with ``shopper_registry(llm=...)``) plays dialogue mode: ``info`` carries ``shopper_opening`` after a reset and ``shopper_reply`` after each step.
A purchase ends the episode as ``terminated``; the action limit ends it as ``truncated``.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium

from ..contract import PURCHASE, SINGLE_TURN
from ..errors import ShopSimError
from .shop_env import ShopEnv, ShopWorld
from .shoppers import ShopperRegistry

MAX_TEXT_LENGTH = 65536
_SAMPLE_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789[] "


class UnicodeText(gymnasium.spaces.Space[str]):
    """Any Unicode string up to ``max_length`` characters (Gymnasium's Text space needs a fixed charset)."""

    def __init__(self, max_length: int = MAX_TEXT_LENGTH, seed: int | None = None) -> None:
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(1, 24))
        return "".join(self.np_random.choice(list(_SAMPLE_ALPHABET), size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length


class ShopGymEnv(gymnasium.Env[str, str]):
    """Gymnasium's API over one ``ShopEnv``: text observations, text actions, the paper reward at the end."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # noqa: RUF012 (an instance attribute in gymnasium.Env)

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | ShopWorld | None = None,
        *,
        world: ShopWorld | None = None,
        split: str = "test",
        persona: bool | None = None,
        interaction_mode: str = SINGLE_TURN,
        render_mode: str | None = None,
        shopper: str | None = None,
        shopper_config: object = None,
        shoppers: ShopperRegistry | None = None,
    ) -> None:
        """``ShopGymEnv(data_dir)`` or ``ShopGymEnv(world)`` (a ``ShopWorld``, positionally or as ``world=``).

        ``split`` names the task ids a reset without ``options["task_id"]`` draws from; ``persona`` forces
        the mode (None: each task's own mode).

        Args:
            data_dir: a prepared data directory, or a ``ShopWorld``.
            world: a ``ShopWorld`` to share (instead of ``data_dir``).
            split: the split reset draws tasks from.
            persona: the mode of every reset (None: each task's own mode).
            interaction_mode: ``single_turn`` or ``multi_turn``.
            render_mode: ``"ansi"`` (``render`` returns the page text) or None.
            shopper, shopper_config: dialogue mode, as ``ShopEnv.reset``.
            shoppers: the shoppers dialogue mode may start (``shopper_registry(llm=...)``; None: no dialogue).

        Raises:
            ShopSimError: neither a data directory nor a world, or two different worlds.
        """
        if isinstance(data_dir, ShopWorld):
            if world is not None and world is not data_dir:
                raise ShopSimError("ShopGymEnv got two different worlds (positionally and as world=)")
            data_dir, world = None, data_dir
        if world is None:
            if data_dir is None:
                raise ShopSimError("ShopGymEnv needs a data directory or a ShopWorld")
            world = ShopWorld.shared(data_dir)
        self.world = world
        self.env = ShopEnv(world, shoppers=shoppers)
        self.task_ids = world.catalog.split(split)
        self.persona = persona
        self.interaction_mode = interaction_mode
        self.render_mode = render_mode
        self.shopper = shopper
        self.shopper_config = shopper_config
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText(max_length=4096)
        self._last_observation = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (Gymnasium's ``reset``).

        Args:
            seed: seeds ``np_random``, which picks the task when ``options`` names none.
            options: ``task_id``, ``persona``, ``interaction_mode``, ``shopper``, ``shopper_config`` for this
                episode (each defaults to the constructor's value).

        Returns:
            The page text and ``info`` (task id, visible instruction, persona, ``observation_state``, tools, and
            ``shopper_opening`` in dialogue mode).
        """
        super().reset(seed=seed)
        options = dict(options or {})
        task_id = options.get("task_id")
        if task_id is None:
            task_id = int(self.task_ids[int(self.np_random.integers(len(self.task_ids)))])
        payload = self.env.reset(
            int(task_id),
            persona=options.get("persona", self.persona),
            interaction_mode=options.get("interaction_mode", self.interaction_mode),
            shopper=options.get("shopper", self.shopper),
            shopper_config=options.get("shopper_config", self.shopper_config),
        )
        self._last_observation = payload["observation"]
        info = {
            "task_id": task_id,
            "task_instruction": payload["task_instruction"],
            "user_persona": payload["user_persona"],
            "observation_state": payload["observation_state"],
            "tools": self.env.tools(),
        }
        if "shopper_opening" in payload:
            info["shopper_opening"] = payload["shopper_opening"]
        return payload["observation"], info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One action (Gymnasium's ``step``).

        Args:
            action: a canonical action string (or model text with one ``Action:`` line).

        Returns:
            ``(observation, reward, terminated, truncated, info)``: ``terminated`` on a purchase, ``truncated`` on
            any other end (action limit, ``terminate``); ``reward`` is ``r_strict``.
        """
        result = self.env.step(action)
        self._last_observation = result["observation"]
        reason = result.get("termination_reason")
        terminated = bool(result["done"]) and reason == PURCHASE
        truncated = bool(result["done"]) and not terminated
        info: dict[str, Any] = {
            "action_feedback": result["action_feedback"],
            "observation_state": result["observation_state"],
            "reward_detail": result["reward_detail"],
            "termination_reason": reason,
        }
        if not result["done"]:
            info["tools"] = self.env.tools()
        if "shopper_reply" in result:
            info["shopper_reply"] = result["shopper_reply"]
        return result["observation"], float(result["reward"]), terminated, truncated, info

    def render(self) -> str | None:
        """The last page text in ``"ansi"`` render mode, else None."""
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Drop the episode (the shared world stays open)."""
        self.env.close()


__all__ = ["ShopGymEnv", "UnicodeText"]
