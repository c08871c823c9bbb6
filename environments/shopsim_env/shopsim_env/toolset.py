"""The shared tool server: one catalog for the whole evaluation, one shop session per rollout.

verifiers starts this module once (``python -m shopsim_env.toolset``) as a taskset-scoped MCP server. The world
(catalog, index, page data) is opened once in ``setup``; each call carries its rollout's state, whose ``session``
key selects (or starts) that rollout's ``ShopEnv``. Tools have bare names, ``search(query)`` and ``click(value)``;
the result is the page text, which lists the clickable values. The goal stays in this process: the state gets the
public reward components only.

Dialogue mode (issue 16): with a ``shopper`` in the config, rollouts play against that shopper and the server
also exposes ``ask_user(question)`` (described by the environment's own ``ask_user`` tool text); its result is
the observation with the shopper's reply. Without a shopper the tool is not registered.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.env.tools.ask_user import ASK_USER
from shopsimrl.env.tools.click import CLICK
from shopsimrl.env.tools.search import SEARCH
from shopsimrl.errors import ShopSimError
from shopsimrl.versions import REPORTED_METRICS

MAX_OPEN_SESSIONS = 4096  # finished sessions are dropped at once; this bounds abandoned ones


class ShopSimState(vf.State):
    """Per-rollout state, shared by the task hooks and the tool server (never the goal)."""

    session: str = ""
    task_id: int = -1
    persona: bool | None = None
    shopper: str | None = None
    step_limit: int = 0  # the episode's own action limit (30; 40 in dialogue mode, questions count)
    steps: int = 0
    done: bool = False
    termination_reason: str | None = None
    reward: float = 0.0
    reward_detail: dict[str, Any] = Field(default_factory=dict)


class ShopSimToolsetConfig(vf.SharedToolsetConfig):
    data: str = "data/default"
    """Prepared data directory (absolute: the server runs in its own working directory)."""
    shopper: str | None = None
    """Dialogue mode: the shopper every rollout plays against (``rule``); only then is ``ask_user`` a tool."""


class ShopSimToolset(vf.Toolset[ShopSimToolsetConfig, ShopSimState]):
    TOOL_PREFIX = None  # bare tool names: search, click

    def __init__(self, config: ShopSimToolsetConfig) -> None:
        super().__init__(config)
        self.world: ShopWorld | None = None
        self.sessions: OrderedDict[str, ShopEnv] = OrderedDict()
        if config.shopper is None:  # single-turn rollouts: an undecorated attribute hides the ask_user tool
            self.ask_user = self._not_a_tool  # type: ignore[method-assign]

    async def _not_a_tool(self, question: str) -> str:
        raise ShopSimError("ask_user is a tool only in dialogue mode (taskset shopper)")

    async def setup(self) -> None:
        self.world = ShopWorld.shared(self.config.data)

    def _env(self) -> ShopEnv:
        state = self.state
        if not state.session or state.task_id < 0:
            raise ShopSimError("no shop session in this rollout's state (the task's setup did not run)")
        env = self.sessions.get(state.session)
        if env is None:
            if self.world is None:
                self.world = ShopWorld.shared(self.config.data)
            env = ShopEnv(self.world)
            if state.shopper is not None:
                env.reset(state.task_id, persona=state.persona, shopper=state.shopper)  # implies multi_turn
            else:
                env.reset(state.task_id, persona=state.persona)
            self.sessions[state.session] = env
            while len(self.sessions) > MAX_OPEN_SESSIONS:
                self.sessions.popitem(last=False)
        return env

    def _act(self, action: str) -> str:
        state = self.state
        if state.done:
            return "任务已结束：请停止调用工具。"
        result = self._env().step(action)
        state.steps += 1
        if result["done"]:
            state.done = True
            state.termination_reason = result.get("termination_reason")
            state.reward = float(result["reward"])
            detail = result.get("reward_detail") or {}
            state.reward_detail = {key: detail[key] for key in REPORTED_METRICS if key in detail}
            self.sessions.pop(state.session, None)  # the engine ends at a purchase or its action limit (30/40)
        return result["observation"]

    # Each tool's action and description come from the environment's own tool (shopsimrl.env.tools, one
    # definition); verifiers reads the description from the docstring.
    @vf.tool
    async def search(self, query: str) -> str:
        return self._act(SEARCH.action(query))

    search.__doc__ = SEARCH.short_docstring()

    @vf.tool
    async def click(self, value: str) -> str:
        return self._act(CLICK.action(value))

    click.__doc__ = CLICK.short_docstring()

    @vf.tool(name=ASK_USER.name)
    async def ask_user(self, question: str) -> str:
        return self._act(ASK_USER.action(question))

    ask_user.__doc__ = ASK_USER.short_docstring()


if __name__ == "__main__":
    ShopSimToolset.run()
