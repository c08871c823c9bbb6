"""The environment interface, declared once: what every way of playing an episode offers and returns.

``ShopEnv`` (in process), ``ShopClient`` and ``AsyncShopClient`` (over HTTP) are interchangeable only if
they agree on method names, parameters and the shape of each result. This module states that agreement as
``typing.Protocol`` classes (checked structurally, by mypy and at run time) and ``TypedDict`` results, so a
runtime or an adapter can be written against the interface instead of one implementation.
``shopsimrl.env.check_env`` checks an implementation's behaviour against the same contract
(docs/contract.md#pages-and-actions, #http-apis).

The result types describe the dicts exactly as ``ShopEnv`` returns them; the HTTP layer adds lease fields
(``env_idx``, ``lease_id``) that the clients remove, and ``idx`` is a per-path session name (see
``PER_PATH_FIELDS``).
"""

from __future__ import annotations

from typing import Any, Protocol, TypedDict, runtime_checkable

# The contract's words (modes, reasons) are defined in ``shopsimrl.contract``; re-exported here with the types.
from ..contract import ACTION_LIMIT, SINGLE_TURN
from ..contract import END_REASONS as END_REASONS
from ..contract import INTERACTION_MODES as INTERACTION_MODES
from ..contract import TERMINATION_REASONS as TERMINATION_REASONS
from ..contract import EndReason as EndReason
from ..contract import InteractionMode as InteractionMode
from ..contract import TaskMode as TaskMode
from ..contract import TerminationReason as TerminationReason

# Result fields whose value legitimately depends on the path (not on the episode): ``idx`` of a step is the
# session name, ``session-<task>`` in process and ``slot-<n>-<task>`` behind the service.
PER_PATH_FIELDS: frozenset[str] = frozenset({"idx"})

JsonObject = dict[str, Any]
Tool = dict[str, Any]


class ActionFeedback(TypedDict):
    """How the environment judged one action (``last_action`` on the next page, ``action_feedback`` here)."""

    action: str
    valid: bool
    reason: str
    message: str


class ActionFeedbackWithAxes(ActionFeedback, total=False):
    """``missing_option_axes`` is present only when ``buy now`` was refused for an incomplete selection;
    ``reply`` only after a valid ``ask_user`` (dialogue mode)."""

    missing_option_axes: list[str]
    reply: str


class _ResetRequired(TypedDict):
    task_instruction: str
    observation: str
    message: str
    idx: int
    task_mode: TaskMode
    interaction_mode: InteractionMode
    environment_version: str
    observation_state: JsonObject
    user_persona: JsonObject


class ResetResult(_ResetRequired, total=False):
    """The result of ``reset``; the private keys are present only with ``include_private_goal=True``, the
    ``shopper*``/``dialogue_version``/``tool_version`` keys only in dialogue mode (``shopper="rule"`` or ``"llm"``)."""

    private_task_instruction: str
    goal_options: list[str]
    reason_key: str | None
    shopper: str
    shopper_version: str
    shopper_opening: str
    dialogue_version: str
    tool_version: str
    shopper_slots: list[str]  # private, dialogue mode with include_private_goal only


class _EpisodeRequired(TypedDict):
    done: bool
    reward: float | int  # the int 0 after an invalid action, as the reference sends it (docs/contract.md notes)
    observation: str
    observation_state: JsonObject
    message: str
    idx: str
    reward_detail: JsonObject
    purchase: JsonObject
    goal: JsonObject
    over: bool


class _StepRequired(_EpisodeRequired):
    action_feedback: ActionFeedbackWithAxes | None


class StepResult(_StepRequired, total=False):
    """The result of ``step``; ``termination_reason`` is present exactly when ``done`` is true; ``dialogue``
    and ``shopper_reply`` only in dialogue mode."""

    termination_reason: EndReason
    dialogue: JsonObject
    shopper_reply: str | None


class _TerminateRequired(_EpisodeRequired):
    termination_reason: TerminationReason


class TerminateResult(_TerminateRequired, total=False):
    """The result of ``terminate``: ``done``, zero reward, the terminal page.

    ``action_feedback`` (the last step's feedback, or None) is returned today by every path; the reference
    sends none, so it is optional here until the paths are aligned (docs/contract.md#http-apis).
    """

    action_feedback: ActionFeedbackWithAxes | None
    dialogue: JsonObject
    shopper_reply: str | None


RESET_REQUIRED_KEYS: frozenset[str] = ResetResult.__required_keys__
RESET_OPTIONAL_KEYS: frozenset[str] = ResetResult.__optional_keys__
STEP_REQUIRED_KEYS: frozenset[str] = StepResult.__required_keys__
STEP_OPTIONAL_KEYS: frozenset[str] = StepResult.__optional_keys__
TERMINATE_REQUIRED_KEYS: frozenset[str] = TerminateResult.__required_keys__
TERMINATE_OPTIONAL_KEYS: frozenset[str] = TerminateResult.__optional_keys__
# Present only in dialogue mode: every other reset / step result is the reference's, key for key.
DIALOGUE_RESET_KEYS = frozenset({"shopper", "shopper_version", "shopper_opening", "dialogue_version", "tool_version",
                                 "shopper_slots"})
DIALOGUE_STEP_KEYS = frozenset({"dialogue", "shopper_reply"})


@runtime_checkable
class ShopEnvironment(Protocol):
    """A synchronous shopping environment (``ShopEnv``, ``ShopClient``).

    ``reset`` starts task ``task_id`` (``persona`` None: the task's own mode; True on a standard task raises
    ``RequestError`` (``persona_unavailable``); ``shopper`` ``"rule"``/``"llm"`` starts a dialogue episode, ``shopper_seed`` seeds
    its shopper and needs one); ``step`` applies one canonical action string; ``terminate`` ends the
    episode with zero reward; ``step`` or ``terminate`` after the end raise ``EpisodeStateError`` (``episode_terminated``).
    Every implementation raises the same classes with the same messages (``shopsimrl.errors``): an unknown task
    ``RequestError`` (``unknown_task``), a malformed argument ``RequestError`` (``invalid_request``) (a non-string action ``RequestError`` (``invalid_action``)),
    a call before the first reset ``EpisodeStateError`` (``no_active_episode``) (docs/contract.md, HTTP errors).
    """

    def reset(
        self,
        task_id: int,
        persona: bool | None = None,
        interaction_mode: str = SINGLE_TURN,
        *,
        include_private_goal: bool = False,
        shopper: str | None = None,
        shopper_seed: int | None = None,
    ) -> ResetResult: ...

    def step(self, action: str) -> StepResult: ...

    def terminate(self, reason: str = ACTION_LIMIT) -> TerminateResult: ...

    def tools(self) -> list[Tool]: ...

    def observation_state(self) -> JsonObject: ...

    @property
    def done(self) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncShopEnvironment(Protocol):
    """The asynchronous form (``AsyncShopClient``): the calls that may wait on I/O are coroutines; ``tools``,
    ``observation_state`` and ``done`` read the last result and stay synchronous."""

    async def reset(
        self,
        task_id: int,
        persona: bool | None = None,
        interaction_mode: str = SINGLE_TURN,
        *,
        include_private_goal: bool = False,
        shopper: str | None = None,
        shopper_seed: int | None = None,
    ) -> ResetResult: ...

    async def step(self, action: str) -> StepResult: ...

    async def terminate(self, reason: str = ACTION_LIMIT) -> TerminateResult: ...

    def tools(self) -> list[Tool]: ...

    def observation_state(self) -> JsonObject: ...

    @property
    def done(self) -> bool: ...

    async def close(self) -> None: ...


PROTOCOL_METHODS: tuple[str, ...] = ("reset", "step", "terminate", "tools", "observation_state", "close")
ASYNC_METHODS: frozenset[str] = frozenset({"reset", "step", "terminate", "close"})

__all__ = [
    "ASYNC_METHODS",
    "END_REASONS",
    "INTERACTION_MODES",
    "PER_PATH_FIELDS",
    "PROTOCOL_METHODS",
    "RESET_OPTIONAL_KEYS",
    "RESET_REQUIRED_KEYS",
    "STEP_OPTIONAL_KEYS",
    "STEP_REQUIRED_KEYS",
    "TERMINATE_OPTIONAL_KEYS",
    "TERMINATE_REQUIRED_KEYS",
    "TERMINATION_REASONS",
    "ActionFeedback",
    "ActionFeedbackWithAxes",
    "AsyncShopEnvironment",
    "EndReason",
    "InteractionMode",
    "JsonObject",
    "ResetResult",
    "ShopEnvironment",
    "StepResult",
    "TaskMode",
    "TerminateResult",
    "TerminationReason",
    "Tool",
]
