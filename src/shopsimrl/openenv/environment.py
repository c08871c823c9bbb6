"""``ShopSimEnvironment``: OpenEnv's ``Environment`` over one shared, read-only ``ShopWorld``.

Each OpenEnv session (one WebSocket) gets its own instance, but all of them read the same catalog, index and
page data, so the server holds the world once however many sessions run. The goal never leaves the engine: the
observation carries the page, the tools and the visible task; the end-of-episode metadata carries only the public
reward components. The episode's steps, its end and its public reward are the episode shell's
(:mod:`shopsimrl.agent.episode_shell`), shared with the harness, TRL's environment class and the verifiers toolset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from ..agent.episode_shell import EpisodeShell
from ..contract import ACTION_LIMIT, PERSONA_MODE, SINGLE_TURN
from ..dialogue.registry import shopper_registry
from ..env.shop_env import ShopEnv, ShopWorld
from ..env.tools import action_of_call, argument_key, tools_for_state
from ..errors import EpisodeStateError, RequestError
from ..stamps import catalog_stamps, task_set_sha256
from ..versions import (
    ENVIRONMENT_VERSION,
    OBSERVATION_VERSION,
    REWARD_VERSION,
    TOOL_VERSION,
)
from .models import ShopSimAction, ShopSimObservation, ShopSimState

DEFAULT_SPLIT = "test"
NO_EPISODE = "no active episode: call reset(task_id) first"  # ShopEnv's message


def version_strings() -> dict[str, str]:
    return {"environment_version": ENVIRONMENT_VERSION, "reward_version": REWARD_VERSION,
            "observation_version": OBSERVATION_VERSION, "tool_version": TOOL_VERSION}


class ShopSimEnvironment(Environment[ShopSimAction, ShopSimObservation, ShopSimState]):
    """One shopping session per instance; every instance shares ``world``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, world: ShopWorld) -> None:
        super().__init__()
        self.world = world
        self._env = ShopEnv(world, shoppers=shopper_registry())  # the rule shopper (dialogue mode)
        self._state = ShopSimState(**version_strings())
        self.shell = EpisodeShell.ended()  # the episode shell (agent/episode_shell.py); reset starts a new one

    # ------------------------------------------------------------------ episode
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: int | None = None,
        split: str | None = None, index: int | None = None, persona: bool | None = None,
        interaction_mode: str = SINGLE_TURN, shopper: str | None = None, **kwargs: Any,
    ) -> ShopSimObservation:
        """Start ``task_id``, or the ``index``-th task of ``split`` (default split test, index ``seed`` or 0).

        ``shopper="rule"`` starts a dialogue episode (always ``multi_turn``): the observation carries
        ``shopper_opening`` instead of the instruction and ``ask_user`` is among the tools."""
        if task_id is None:
            ids = self.world.catalog.split(split or DEFAULT_SPLIT)
            position = index if index is not None else (seed or 0)
            if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < len(ids):
                raise RequestError(f"task index {position!r} is outside split {split or DEFAULT_SPLIT!r} "
                                        f"(0..{len(ids) - 1})", code="invalid_request")
            task_id = ids[position]
        if shopper is not None:  # implies multi_turn; an unknown shopper is ShopEnv's RequestError
            payload = self._env.reset(task_id, persona=persona, interaction_mode=interaction_mode,
                                      session_id=episode_id, shopper=shopper)
        else:
            payload = self._env.reset(task_id, persona=persona, interaction_mode=interaction_mode,
                                      session_id=episode_id)
        interaction_mode = payload["interaction_mode"]
        self.shell = EpisodeShell(self._env, payload)
        stamps = catalog_stamps(self.world.catalog.root, self.world.catalog.manifest)
        self._state = ShopSimState(
            episode_id=episode_id, step_count=0, task_id=task_id, persona=payload["task_mode"] == PERSONA_MODE,
            interaction_mode=interaction_mode, shopper=shopper, action_limit=self.shell.limit,
            generator_version=stamps["generator_version"], catalog_sha256=stamps["catalog_sha256"],
            **version_strings(),
        )
        state = payload["observation_state"]
        return ShopSimObservation(
            page_text=payload["observation"], observation_state=state, tools=tools_for_state(state),
            task_instruction=payload["task_instruction"], user_persona=payload["user_persona"] or None,
            shopper_opening=payload.get("shopper_opening"), done=False, reward=0.0,
        )

    def step(self, action: ShopSimAction, timeout_s: float | None = None, **kwargs: Any) -> ShopSimObservation:
        if self._env.session is None:
            raise EpisodeStateError(NO_EPISODE, code="no_active_episode")
        text = action_of_call(action.tool, action.arguments)
        if text is None:
            raise RequestError(f"{action.tool} needs a string argument {argument_key(action.tool)!r}", code="invalid_action")
        result = self.shell.step(text)
        self._state.step_count = self.shell.steps
        return self._observation(result)

    def terminate(self, reason: str = ACTION_LIMIT) -> ShopSimObservation:
        """End the episode for the runner (``generation_length`` / ``action_limit``); not a tool of the model."""
        if self._env.session is None:
            raise EpisodeStateError(NO_EPISODE, code="no_active_episode")
        return self._observation(self.shell.terminate(reason))

    def _observation(self, result: Mapping[str, Any]) -> ShopSimObservation:
        done = self.shell.done
        state = result["observation_state"]
        if done:
            self._state.done = True
            self._state.termination_reason = self.shell.termination_reason
        return ShopSimObservation(
            page_text=result["observation"], observation_state=state, tools=tools_for_state(state),
            action_feedback=result.get("action_feedback"), shopper_reply=result.get("shopper_reply"), done=done,
            reward=self.shell.reward, metadata=self.shell.public,
        )

    @property
    def state(self) -> ShopSimState:
        return self._state

    def stamps(self) -> dict[str, Any]:
        """The served catalog's version stamps (``shopsimrl.stamps``); the task set is every task of the catalog."""
        catalog = self.world.catalog
        return {**catalog_stamps(catalog.root, catalog.manifest),
                "task_set_sha256": task_set_sha256(("all", t) for t in catalog.split("all"))}

    def get_metadata(self) -> EnvironmentMetadata:
        versions = ", ".join(f"{k}={v}" for k, v in {**version_strings(), **self.stamps()}.items())
        return EnvironmentMetadata(
            name="shopsim", version=ENVIRONMENT_VERSION,
            description=(f"ShopSimRL: deterministic simulated shop; search and click to buy the right item "
                         f"(reset with shopper='rule' for dialogue mode: ask_user) ({versions})"),
        )

    # ------------------------------------------------------------------ task discovery (ids only)
    def list_splits(self) -> list[dict[str, str]]:
        kinds = {"train": "train", "val": "validation", "test": "test"}
        return [{"name": name, "type": kinds.get(name, "validation")} for name in self.world.catalog.split_names]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [{"id": task_id, "index": i} for i, task_id in enumerate(self.world.catalog.split(split))]

    def num_tasks(self, split: str) -> int:
        return len(self.world.catalog.split(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        ids = self.world.catalog.split(split)
        if not 0 <= index < len(ids):
            raise RequestError(f"task index {index!r} is outside split {split!r} (0..{len(ids) - 1})", code="invalid_request")
        return {"id": ids[index], "index": index}

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        ids = self.world.catalog.split(split)
        for name, bound in (("start", start), ("stop", stop)):
            if bound is not None and bound < 0:
                raise RequestError(f"task range {name} {bound!r} is negative (indexes run 0..{len(ids) - 1})", code="invalid_request")
        begin = 0 if start is None else start
        return [{"id": task_id, "index": begin + i} for i, task_id in enumerate(ids[start:stop])]

    def close(self) -> None:
        self._env.close()
