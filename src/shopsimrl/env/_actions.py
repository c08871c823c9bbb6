"""The step feedback the state machine returns (docs/contract.md#step-checks): messages and the feedback object.

The action-string grammar, the model-text extraction and the feedback codes are contract vocabulary
(``shopsimrl.contract``); they are re-exported here for the code written against this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..contract import ACTION_LINE_PATTERN as ACTION_LINE_PATTERN
from ..contract import ALREADY_SELECTED as ALREADY_SELECTED
from ..contract import EMPTY_ARGUMENT as EMPTY_ARGUMENT
from ..contract import EXECUTED as EXECUTED
from ..contract import INCOMPLETE_OPTIONS as INCOMPLETE_OPTIONS
from ..contract import INVALID_FORMAT as INVALID_FORMAT
from ..contract import MSG_BAD_FORMAT as MSG_BAD_FORMAT
from ..contract import MSG_EMPTY_ACTION as MSG_EMPTY_ACTION
from ..contract import MSG_EMPTY_NAME as MSG_EMPTY_NAME
from ..contract import MSG_MULTIPLE as MSG_MULTIPLE
from ..contract import MSG_NOT_STRING as MSG_NOT_STRING
from ..contract import MSG_STRICT_FORMAT as MSG_STRICT_FORMAT
from ..contract import MULTIPLE_ACTIONS as MULTIPLE_ACTIONS
from ..contract import SEARCH_UNAVAILABLE as SEARCH_UNAVAILABLE
from ..contract import UNAVAILABLE_ACTION as UNAVAILABLE_ACTION
from ..contract import ParsedAction as ParsedAction
from ..contract import action_lines as action_lines
from ..contract import extract_action as extract_action
from ..contract import parse_action as parse_action

# The message of an action whose name is no tool of this session (docs/contract.md#step-checks); each tool's own
# messages live in its module (``env/tools``).
MSG_UNKNOWN_ACTION_NAME = "动作必须使用 search[...] 或 click[...] 格式"


def feedback(
    action: str,
    valid: bool,
    reason: str,
    message: str,
    *,
    missing_option_axes: Sequence[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The feedback object stored as ``last_action`` and returned as ``action_feedback`` (``extra``: a tool's
    own keys, such as ``ask_user``'s ``reply``)."""
    payload: dict[str, Any] = {"action": action, "valid": valid, "reason": reason, "message": message}
    if missing_option_axes is not None:
        payload["missing_option_axes"] = list(missing_option_axes)
    payload.update(extra)
    return payload
