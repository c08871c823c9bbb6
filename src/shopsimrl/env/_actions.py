"""The step feedback the state machine returns (docs/contract.md#step-checks): messages and the feedback object.

The action-string grammar, the model-text extraction and the feedback codes are contract vocabulary
(``shopsimrl.contract``); they are re-exported here for the code written against this module. The step
messages below are used by the state machine only, so it never spells a contract string itself.
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

# Step messages (docs/contract.md#step-checks); the ones ending in "：" are prefixes completed by the argument or
# the missing axes.
MSG_EMPTY_SEARCH = "search[...] 的关键词不能为空"
MSG_SEARCH_UNAVAILABLE = "当前页面不提供搜索操作"
MSG_SEARCH_EXECUTED = "搜索已执行"
MSG_EMPTY_CLICK = "click[...] 的点击值不能为空"
MSG_ALREADY_SELECTED = "该规格已经选中："
MSG_PURCHASE_EXECUTED = "购买已执行"
MSG_INCOMPLETE_OPTIONS = "购买前还需选择规格轴："
MSG_CLICK_EXECUTED = "点击已执行"
MSG_UNAVAILABLE_ACTION = "当前页面不存在可点击项："
MSG_UNKNOWN_ACTION_NAME = "动作必须使用 search[...] 或 click[...] 格式"
MISSING_AXES_SEPARATOR = "、"


def feedback(
    action: str,
    valid: bool,
    reason: str,
    message: str,
    *,
    missing_option_axes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The feedback object stored as ``last_action`` and returned as ``action_feedback``."""
    payload: dict[str, Any] = {"action": action, "valid": valid, "reason": reason, "message": message}
    if missing_option_axes is not None:
        payload["missing_option_axes"] = list(missing_option_axes)
    return payload
