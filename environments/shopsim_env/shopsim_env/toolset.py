"""The shared tool server: one catalog for the whole evaluation, one shop session per rollout.

verifiers starts this module once (``python -m shopsim_env.toolset``) as a taskset-scoped MCP server. The world
(catalog, index, page data) is opened once in ``setup``; each call carries its rollout's state, whose ``session``
key selects (or starts) that rollout's ``ShopEnv``. Tools have bare names, ``search(query)`` and ``click(value)``;
the result is the page text, which lists the clickable values. Each session is an episode shell
(``shopsimrl.agent.episode_shell``: steps, the end, one answer after it); the goal stays in this process: the
state gets the public reward components only.

Dialogue mode (issue 16): with a ``shopper`` in the config, rollouts play against that shopper and the server
also exposes ``ask_user(question)`` (described by the environment's own ``ask_user`` tool text); its result is
the observation with the shopper's reply. Without a shopper the tool is not registered.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from shopsimrl.agent.episode_shell import EpisodeShell
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.env.tools import TOOLS, tool_method
from shopsimrl.errors import ShopSimError

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
        self.sessions: OrderedDict[str, EpisodeShell] = OrderedDict()
        if config.shopper is None:  # single-turn rollouts: an undecorated attribute hides each dialogue-only tool
            for tool in TOOLS:
                if tool.dialogue_only:
                    setattr(self, tool.name, self._not_a_tool)

    async def _not_a_tool(self, *args: object, **kwargs: object) -> str:
        raise ShopSimError("this tool is offered only in dialogue mode (taskset shopper)")

    async def setup(self) -> None:
        self.world = ShopWorld.shared(self.config.data)

    def _shell(self) -> EpisodeShell:
        """This rollout's episode shell: its session's, a new one on the first call, an ended one after the end."""
        state = self.state
        if state.done:
            return EpisodeShell.ended()  # the session was dropped at the end; the state remembers it
        if not state.session or state.task_id < 0:
            raise ShopSimError("no shop session in this rollout's state (the task's setup did not run)")
        shell = self.sessions.get(state.session)
        if shell is None:
            if self.world is None:
                self.world = ShopWorld.shared(self.config.data)
            env = ShopEnv(self.world, shoppers=shopper_registry())
            if state.shopper is not None:
                reset = env.reset(state.task_id, persona=state.persona, shopper=state.shopper)  # implies multi_turn
            else:
                reset = env.reset(state.task_id, persona=state.persona)
            shell = self.sessions[state.session] = EpisodeShell(env, reset)
            while len(self.sessions) > MAX_OPEN_SESSIONS:
                self.sessions.popitem(last=False)
        return shell

    def _act(self, action: str) -> str:
        state = self.state
        shell = self._shell()
        if shell.done:  # after the end: the shell's one answer, nothing is stepped or counted
            return shell.call(action)
        text = shell.call(action)
        state.steps += 1
        if shell.done:  # the engine ends at a purchase or its action limit (30/40)
            for key, value in shell.outcome().items():
                setattr(state, key, value)
            self.sessions.pop(state.session, None)
        return text


def _install_tools() -> None:
    """Each of the environment's tools (``shopsimrl.env.tools``) is a ``@vf.tool`` method: its name, argument and
    description (verifiers reads it from the docstring) come from the tool itself, its action is one step."""
    for tool in TOOLS:
        method = tool_method(tool, tool.short_docstring(), ShopSimToolset._act, is_async=True)
        setattr(ShopSimToolset, tool.name, vf.tool(method, name=tool.name))


_install_tools()


if __name__ == "__main__":
    ShopSimToolset.run()
