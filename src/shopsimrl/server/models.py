"""Pydantic models of the resource-style ``/v1`` API, so its OpenAPI schema describes what is really sent.

Page data (``observation_state``, ``reward_detail``, ``purchase``, ``goal``) is versioned by the environment
(docs/contract.md#observation, #reward) and passed through as objects; the envelope around it is typed here.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt

from ..contract import ACTION_LIMIT, SINGLE_TURN, ShopperName
from ..contract import InteractionMode as InteractionMode
from ..contract import TaskMode as TaskMode
from ..contract import TerminationReason as TerminationReason
from ..env.tools import TOOLS

# The reference API's canonical actions, from the registry: `search[...]` / `click[...]` (no dialogue-only tool).
_PAGE_ACTIONS = " / ".join(f"`{tool.name}[...]`" for tool in TOOLS if not tool.dialogue_only)


def _integral(value: object) -> object:
    """``7.0`` is the integer 7 for JSON Schema (and so for the schema's clients); other values go on unchanged."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**63 else value


Seed = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1), BeforeValidator(_integral)]


class ErrorBody(BaseModel):
    error: str = Field(description="what was wrong with the request, for a person to read")
    code: str = Field(description="the error's stable machine-readable code (docs/contract.md, HTTP errors): "
                                  "match on it, never on the message")


class CreateSession(BaseModel):
    """Start an episode (the reference ``reset``); waits in FIFO order when every slot is leased."""

    # shopper_seed needs a shopper (env/requests.py): said in the schema too, so generated clients know it
    model_config = ConfigDict(extra="forbid", json_schema_extra={"dependentSchemas": {"shopper_seed": {
        "required": ["shopper"], "properties": {"shopper": {"type": "string"}}}}})
    task_id: StrictInt = Field(description="an active task id of the loaded catalog")
    persona: StrictBool | None = Field(
        None, description="persona mode (the simple instruction plus the user profile); null or absent: the task's "
                          "own mode, as ShopEnv.reset; true on a standard task is a 400")
    interaction_mode: InteractionMode = SINGLE_TURN
    include_private_goal: StrictBool = False
    wait_timeout: StrictFloat | None = Field(  # strict: false or "5" is refused, as by the reference API
        None, ge=0, le=86_400, description="seconds to wait for a free slot (503 after)")
    shopper: ShopperName | None = Field(
        None, description="dialogue mode: the simulated shopper the agent can ask (ask_user); implies multi_turn and "
                          "withholds the instruction (the reply carries shopper_opening); null or absent: no dialogue")
    shopper_seed: Seed | None = Field(
        None,
        description="the shopper's sample seed (the LLM shopper sends it with each request); null: 0; it needs a "
                    "shopper (a 400 without one, as ShopEnv.reset)")


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str = Field(description=f"canonical {_PAGE_ACTIONS}, or model text with one `Action:` "
                        "line; at most the server's --max-response-chars (default 65,536; 413 beyond)")


class TerminateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: TerminationReason = ACTION_LIMIT


class SessionCreated(BaseModel):
    session_id: str = Field(description="the lease id; every later call names it")
    env_idx: int
    task_instruction: str
    observation: str
    message: str
    idx: int
    task_mode: TaskMode
    interaction_mode: InteractionMode
    environment_version: str
    observation_state: dict[str, Any]
    user_persona: dict[str, Any]
    private_task_instruction: str | None = None
    goal_options: list[str] | None = None
    reason_key: str | None = None
    shopper: str | None = Field(None, description="dialogue mode only, as every field below")
    shopper_version: str | None = None
    shopper_opening: str | None = Field(None, description="the shopper's first message: the task the agent sees")
    dialogue_version: str | None = None
    tool_version: str | None = None
    shopper_slots: list[str] | None = Field(None, description="private (include_private_goal): the shopper's slots")


class StepResult(BaseModel):
    done: bool
    reward: float | int  # the int 0 after an invalid action, as the reference
    observation: str
    observation_state: dict[str, Any]
    action_feedback: dict[str, Any] | None = Field(None, description="absent after terminate (no action was taken)")
    message: str
    idx: str
    reward_detail: dict[str, Any]
    purchase: dict[str, Any]
    goal: dict[str, Any]
    over: bool
    termination_reason: str | None = None
    dialogue: dict[str, Any] | None = Field(None, description="dialogue mode only: questions asked, and slot recall "
                                            "once done")
    shopper_reply: str | None = Field(None, description="dialogue mode only: the reply to this step's ask_user")


class SessionState(BaseModel):
    session_id: str
    env_idx: int
    task_id: int
    interaction_mode: InteractionMode
    done: bool
    action_count: int
    max_actions: int
    termination_reason: str | None
    observation: str
    observation_state: dict[str, Any]


class DialogueTranscript(BaseModel):
    transcript: list[dict[str, Any]] | None = Field(
        description="one entry per question (reply, matched slots, noise), as ShopEnv.dialogue_transcript; null "
                    "outside dialogue mode")


class Released(BaseModel):
    released: bool
    session_id: str


class TaskInfo(BaseModel):
    task_id: int
    has_persona: bool
    preview: str = Field(description="the start of the instruction a persona-mode agent sees")


class TaskList(BaseModel):
    tasks: list[TaskInfo] = Field(description="one page of tasks, in task id order")
    total: int = Field(description="how many active tasks there are in all")
    offset: int
    next_offset: int | None = Field(description="the offset of the next page; null on the last page")


class Health(BaseModel):
    ready: bool
    environment_slots: int
    free_slots: int
    live_sessions: int
    waiting_resets: int
    tasks: int
    environment_version: str
    primary_reward: str
    observation_version: str
    debug_ui: str
    replay_ui: str
