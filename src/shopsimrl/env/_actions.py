"""The step feedback the state machine returns (docs/contract.md#step-checks): messages and the feedback object.

The action-string grammar, the model-text extraction and the feedback codes are contract vocabulary: import them
from ``shopsimrl.contract``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
