"""The arguments of reset / step / terminate, checked in one place the environment owns.

``ShopEnv`` calls these checks, and so does the HTTP service before it waits for a slot, so a malformed request
fails the same way (same class, same message) in process, through either HTTP API and through the clients:
the task id, the interaction mode, the persona and private-goal flags, the shopper and its seed (a 64-bit
integer that needs a shopper), the LLM shopper's endpoint, the response cap and the termination reason.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from ..contract import (
    SHOPPER_NAMES,
    TERMINATION_REASONS,
    TerminationReason,
    check_task_id,
    require_action_text,
)
from ..errors import RequestError
from ..versions import EPISODE_LIMITS
from .shoppers import check_offered

# One step's model text, in characters: the parsers are linear, this bounds the work on every path.
MAX_RESPONSE_CHARS: Final = 65_536
SEED_MIN: Final = -(2**63)
SEED_MAX: Final = 2**63 - 1


def check_interaction_mode(interaction_mode: object) -> str:
    if not isinstance(interaction_mode, str) or interaction_mode not in EPISODE_LIMITS:
        raise RequestError(
            f"unsupported interaction_mode {interaction_mode!r}; choose one of {sorted(EPISODE_LIMITS)}", code="invalid_request")
    return interaction_mode


def check_shopper(shopper: object) -> None:
    """Refuse a dialogue shopper this version does not know."""
    if shopper is not None and shopper not in SHOPPER_NAMES:
        raise RequestError(f"unknown shopper {shopper!r}; choose 'rule' or 'llm' (or None for no dialogue)", code="dialogue_unavailable")


def check_reset(
    task_id: object,
    *,
    persona: object,
    interaction_mode: object,
    include_private_goal: object,
    shopper: object,
    shopper_seed: object,
    offered: Collection[str],
) -> int:
    """Every check of a reset that needs no catalog (the task's existence and persona are the catalog's);
    returns the task id. ``offered``: the shoppers the environment was given. Raises RequestError
    (invalid_task_id, invalid_request, dialogue_unavailable)."""
    check_task_id(task_id)
    check_interaction_mode(interaction_mode)
    if not isinstance(persona, (bool, type(None))) or not isinstance(include_private_goal, bool):
        raise RequestError("if_persona must be a boolean or null (the task's own mode); "
                                  "include_private_goal must be a boolean", code="invalid_request")
    check_shopper(shopper)
    check_offered(shopper, offered)
    if shopper_seed is not None:
        if isinstance(shopper_seed, bool) or not isinstance(shopper_seed, int) or not SEED_MIN <= shopper_seed <= SEED_MAX:
            raise RequestError("shopper_seed must be a 64-bit integer or null", code="invalid_request")
        if shopper is None:
            raise RequestError("shopper_seed is the shopper's seed: it needs shopper='rule' or 'llm'", code="dialogue_unavailable")
    assert isinstance(task_id, int)
    return task_id


def check_response(response: object, max_chars: int = MAX_RESPONSE_CHARS) -> str:
    """A step's action text: a string of at most ``max_chars`` characters (RequestError, RequestError)."""
    text = require_action_text(response)
    if len(text) > max_chars:
        raise RequestError(f"response is {len(text)} characters; this environment accepts at most "
                              f"{max_chars} per step (serve --max-response-chars)", code="response_too_long")
    return text


TRANSCRIPT_PRIVATE: Final = ("the dialogue transcript names the private slots: it is available once the episode "
                              "is over, or throughout one reset with include_private_goal")


def check_transcript_access(done: bool, include_private_goal: bool) -> None:
    """The shopper's transcript (matched slots, noise) is private: after the episode, or for a private reset."""
    if not done and not include_private_goal:
        raise RequestError(TRANSCRIPT_PRIVATE, code="invalid_request")


def check_termination_reason(reason: object) -> TerminationReason:
    if reason not in TERMINATION_REASONS:
        raise RequestError(f"unsupported termination reason: {reason}", code="invalid_request")
    return reason  # one of the Literal's values, checked above
