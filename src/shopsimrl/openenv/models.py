"""Typed OpenEnv models: an action is one tool call, the observation is the page, the state holds no goal.

Field names follow the runtime's wire format (``observation_state``, ``action_feedback``, OpenAI ``tools``) so
that a model trained through OpenEnv sees what the runtime shows it.
"""

from __future__ import annotations

from typing import Annotated, Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from ..contract import SINGLE_TURN
from ..env.tools import TOOLS, arguments_summary, tool_choice_summary, tool_named, tool_names
from ..versions import EPISODE_LIMITS


def _registered(name: str) -> str:
    """A ``PydanticCustomError``, not a ``ValueError``: OpenEnv sends ``errors()`` back as JSON, and a
    ``ValueError`` in an error's context cannot be serialised (the session would end with SESSION_ERROR)."""
    if tool_named(name) is None:
        raise PydanticCustomError("unknown_tool", "unknown tool '{name}'; the tools are {tools}",
                                  {"name": name, "tools": ", ".join(tool_names())})
    return name


class ShopSimAction(Action):
    """One tool call: ``search`` with ``{"query": …}``, ``click`` with ``{"value": …}`` (a value of the enum), or
    ``ask_user`` with ``{"question": …}`` (dialogue episodes only: reset with a ``shopper``)."""

    tool: Annotated[str, AfterValidator(_registered)] = Field(
        description=f"the tool called: {tool_choice_summary()}",
        json_schema_extra={"enum": [tool.name for tool in TOOLS]})
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description=arguments_summary())


class ShopSimObservation(Observation):
    """The page after reset or a step; ``reward`` is r_strict at the end, 0 before; ``metadata`` public components."""

    page_text: str = Field(description="the rendered page (shopping-observation-v7)")
    observation_state: dict[str, Any] = Field(default_factory=dict, description="the page as structured data")
    tools: list[dict[str, Any]] = Field(default_factory=list,
                                        description="OpenAI function tools of this page (click has the page's enum)")
    action_feedback: dict[str, Any] | None = Field(default=None, description="how the last action was handled")
    task_instruction: str | None = Field(default=None, description="the visible task (at reset only)")
    user_persona: dict[str, Any] | None = Field(default=None, description="the persona (at reset, persona tasks)")
    shopper_opening: str | None = Field(default=None,
                                        description="dialogue mode: the shopper's first message (at reset; the "
                                                    "instruction is then withheld)")
    shopper_reply: str | None = Field(default=None, description="dialogue mode: the shopper's reply to ask_user")


class ShopSimState(State):
    """Episode bookkeeping; deliberately without the goal."""

    task_id: int | None = None
    persona: bool = False
    interaction_mode: str = SINGLE_TURN
    shopper: str | None = None  # dialogue mode: the shopper's name, None for single-turn episodes
    action_limit: int = EPISODE_LIMITS[SINGLE_TURN]
    done: bool = False
    termination_reason: str | None = None
    environment_version: str = ""
    reward_version: str = ""
    observation_version: str = ""
    tool_version: str = ""
    generator_version: str | None = None  # version stamps of the served catalog (shopsimrl.stamps)
    catalog_sha256: str | None = None
