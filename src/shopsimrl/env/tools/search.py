"""``search(query)``: offered on the search home only; runs the query and opens its first results page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...contract import EMPTY_ARGUMENT, EXECUTED, QUERY_ARGUMENT, SEARCH_HOME, SEARCH_TOOL, SEARCH_UNAVAILABLE
from .._actions import feedback
from ._tool import Tool, ToolSession

SEARCH_DESCRIPTION = "使用关键词搜索商品。仅在当前页面提供此工具时调用。"
QUERY_DESCRIPTION = "用于检索商品的简洁关键词。"
# Step messages (docs/contract.md#step-checks).
MSG_EMPTY_SEARCH = "search[...] 的关键词不能为空"
MSG_SEARCH_UNAVAILABLE = "当前页面不提供搜索操作"
MSG_SEARCH_EXECUTED = "搜索已执行"


class SearchTool(Tool):
    name: ClassVar[str] = SEARCH_TOOL
    argument: ClassVar[str] = QUERY_ARGUMENT
    description: ClassVar[str] = SEARCH_DESCRIPTION
    argument_description: ClassVar[str] = QUERY_DESCRIPTION
    min_length: ClassVar[int | None] = 1
    feedback_codes: ClassVar[tuple[str, ...]] = (EXECUTED, EMPTY_ARGUMENT, SEARCH_UNAVAILABLE)

    def offered(self, state: Mapping[str, Any]) -> bool:
        return state.get("search_available") is True

    def apply(self, session: ToolSession, argument: str | None, shown: str) -> dict[str, Any]:
        if argument is None or not argument.strip():
            return feedback(shown, False, EMPTY_ARGUMENT, MSG_EMPTY_SEARCH)
        if session.page != SEARCH_HOME:
            return feedback(shown, False, SEARCH_UNAVAILABLE, MSG_SEARCH_UNAVAILABLE)
        session.run_search(argument)
        return feedback(shown, True, EXECUTED, MSG_SEARCH_EXECUTED)


SEARCH = SearchTool()
