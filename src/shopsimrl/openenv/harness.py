"""A resource-session factory for OpenEnv's harness layer (``openenv.core.harness``), as TRL's async GRPO uses it.

A session is one episode: ``initial_messages`` are the runtime's exact system prompt and first user message,
``list_tools`` the current page's tools (``click`` with the page's enum), ``call_tool`` one step, and ``verify``
forwards the environment's own ``r_strict`` (0 without a purchase) with the public components as metrics.

OpenEnv's ``MCPHarnessAdapter`` lists the tools once per episode; for such harnesses ``per_page_tools=False``
lists the environment's whole-episode tools (``env.tools.episode_tools``: ``click`` without an enum, the page text
lists the clickable values, the same list the chat templates render), and
leaves a tool the page does not offer to the environment (an invalid action), as verifiers does.

Dialogue mode: ``ShopSimSessionFactory(world, shopper="rule")`` (or a task spec ``{"id": …,
"shopper": "rule"}``) starts dialogue episodes: the first user message is the shopper's opening, ``ask_user`` is
a tool (per page while offered; for the whole episode with ``per_page_tools=False``) and its result is the reply.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.mcp_types import Tool
from openenv.core.harness import ResourceSession, ResourceSessionFactory, ToolResult, VerifyResult

from ..agent.episode_shell import EPISODE_OVER
from ..agent.prompt import first_user_message, system_message
from ..contract import is_task_id
from ..env.shop_env import ShopWorld
from ..env.tools import episode_tools
from ..errors import RequestError
from .environment import ShopSimEnvironment
from .models import ShopSimAction


def _static_tools(dialogue: bool = False) -> list[dict[str, Any]]:
    """The environment's whole-episode tools (``click`` without the page's enum; ``ask_user`` in dialogue mode)."""
    return episode_tools(dialogue=dialogue)


class ShopSimSession(ResourceSession):
    def __init__(
        self, world: ShopWorld, task_id: int, *, episode_id: str | None = None, per_page_tools: bool = True,
        shopper: str | None = None,
    ) -> None:
        self.per_page_tools = per_page_tools
        self.dialogue = shopper is not None
        self.env = ShopSimEnvironment(world)
        self.observation = self.env.reset(task_id=task_id, episode_id=episode_id, shopper=shopper)
        visible = (self.observation.shopper_opening if self.dialogue else self.observation.task_instruction) or ""
        self._messages = [
            {"role": "system", "content": system_message(self.observation.user_persona or {})},
            {"role": "user", "content": first_user_message(visible, self.observation.page_text)},
        ]

    def initial_messages(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self._messages]

    def list_tools(self) -> list[Tool]:
        tools = self.observation.tools if self.per_page_tools else _static_tools(self.dialogue)
        return [Tool(name=t["function"]["name"], description=t["function"]["description"],
                     input_schema=t["function"]["parameters"]) for t in tools]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if self.env.shell.done:
            return ToolResult(error=EPISODE_OVER, done=True)
        tools = self.observation.tools if self.per_page_tools else _static_tools(self.dialogue)
        offered = {t["function"]["name"] for t in tools}
        if name not in offered:
            return ToolResult(data=self.observation.page_text, error=f"tool {name!r} is not offered on this page")
        try:
            self.observation = self.env.step(ShopSimAction(tool=name, arguments=dict(arguments)))
        except ValueError as exc:  # a RequestError or the action model's own check
            return ToolResult(data=self.observation.page_text, error=str(exc))
        return ToolResult(data=self.observation.page_text, done=self.observation.done,
                          metadata=dict(self.observation.metadata))

    def verify(self, transcript: list[dict[str, Any]], final_state: Any | None = None) -> VerifyResult:
        shell = self.env.shell
        return VerifyResult(env_reward=shell.reward, done=shell.done, metrics=shell.public,
                            artifacts={"task_id": self.env.state.task_id, "termination_reason": shell.termination_reason})

    def close(self) -> None:
        self.env.close()


class ShopSimSessionFactory(ResourceSessionFactory[ShopSimSession]):
    """``create(task)`` with a task id or a task spec ``{"id": …}`` from the task-discovery routes; ``shopper``
    (the factory's, or the spec's ``"shopper"`` key) makes it a dialogue episode."""

    def __init__(self, world: ShopWorld, *, per_page_tools: bool = True, shopper: str | None = None) -> None:
        self.world = world
        self.per_page_tools = per_page_tools
        self.shopper = shopper

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> ShopSimSession:
        task_id = task.get("id") if isinstance(task, dict) else task
        if not is_task_id(task_id):
            raise RequestError(f"a task is a task id or {{'id': task_id}}, not {task!r}", code="invalid_request")
        shopper = task.get("shopper", self.shopper) if isinstance(task, dict) else self.shopper
        return ShopSimSession(self.world, task_id, episode_id=episode_id, per_page_tools=self.per_page_tools,
                              shopper=shopper)
