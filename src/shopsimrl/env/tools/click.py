"""``click(value)``: offered wherever the page has clickable values, its schema's enum is exactly those values.

The tool decides what a value does (:func:`_click`): back to search, the results' next/previous page, a
product, the product page's previous page (its results page), an option, or buy now."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...contract import (
    ALREADY_SELECTED,
    BACK_TO_SEARCH,
    BUY_NOW,
    CLICK_TOOL,
    EMPTY_ARGUMENT,
    EXECUTED,
    INCOMPLETE_OPTIONS,
    NEXT,
    OPTION_SEPARATOR,
    PREV,
    PRODUCT_DETAIL,
    SEARCH_RESULTS,
    UNAVAILABLE_ACTION,
    VALUE_ARGUMENT,
)
from .._actions import feedback
from ._tool import Tool, ToolSession

CLICK_DESCRIPTION = "点击当前页面的一个可用按钮、商品或规格选项。"
VALUE_DESCRIPTION = "必须逐字选择当前可点击值之一。"
EPISODE_VALUE_DESCRIPTION = VALUE_DESCRIPTION + "（当前可点击值见观察文本的“可点击元素”）"
# Step messages (docs/contract.md#step-checks); the ones ending in "：" are completed by the argument or the axes.
MSG_EMPTY_CLICK = "click[...] 的点击值不能为空"
MSG_ALREADY_SELECTED = "该规格已经选中："
MSG_PURCHASE_EXECUTED = "购买已执行"
MSG_INCOMPLETE_OPTIONS = "购买前还需选择规格轴："
MSG_CLICK_EXECUTED = "点击已执行"
MSG_UNAVAILABLE_ACTION = "当前页面不存在可点击项："
MISSING_AXES_SEPARATOR = "、"


class ClickTool(Tool):
    name: ClassVar[str] = CLICK_TOOL
    argument: ClassVar[str] = VALUE_ARGUMENT
    description: ClassVar[str] = CLICK_DESCRIPTION
    argument_description: ClassVar[str] = VALUE_DESCRIPTION
    episode_argument_description: ClassVar[str | None] = EPISODE_VALUE_DESCRIPTION
    argument_kind: ClassVar[str] = "enum value"
    feedback_codes: ClassVar[tuple[str, ...]] = (
        EXECUTED, EMPTY_ARGUMENT, ALREADY_SELECTED, INCOMPLETE_OPTIONS, UNAVAILABLE_ACTION,
    )

    def offered(self, state: Mapping[str, Any]) -> bool:
        return bool(state.get("actions"))

    def argument_schema(self, state: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if state is None:
            return super().argument_schema()
        return {"type": "string", "enum": list(state["actions"]), "description": self.argument_description}

    def apply(self, session: ToolSession, argument: str | None, shown: str) -> dict[str, Any]:
        if argument is None or not argument.strip():
            return feedback(shown, False, EMPTY_ARGUMENT, MSG_EMPTY_CLICK)
        on_product = session.page == PRODUCT_DETAIL
        if on_product and _is_selected(session.options, argument):
            return feedback(shown, False, ALREADY_SELECTED, MSG_ALREADY_SELECTED + argument)
        if argument == BUY_NOW and on_product:
            missing = session.missing_axes()
            if missing:
                return feedback(shown, False, INCOMPLETE_OPTIONS,
                                MSG_INCOMPLETE_OPTIONS + MISSING_AXES_SEPARATOR.join(missing),
                                missing_option_axes=missing)
            session.buy()
            return feedback(shown, True, EXECUTED, MSG_PURCHASE_EXECUTED)
        if argument in session.clickables():
            _click(session, argument)
            return feedback(shown, True, EXECUTED, MSG_CLICK_EXECUTED)
        return feedback(shown, False, UNAVAILABLE_ACTION, MSG_UNAVAILABLE_ACTION + argument)


def _click(session: ToolSession, label: str) -> None:
    """The transition of a clickable ``label`` (one of ``session.clickables()``, not buy now)."""
    if label == BACK_TO_SEARCH:
        session.go_home()
    elif session.page == SEARCH_RESULTS:
        if label in (NEXT, PREV):
            session.show_results(session.page_number + (1 if label == NEXT else -1))
        else:
            session.open_product(next(asin for asin in session.page_asins() if asin.casefold() == label))
    elif label == PREV:  # the product page's previous page is the results page it was opened from
        session.show_results(session.page_number)
    else:
        assert session.view is not None
        option = session.view.label_of(label)
        assert option is not None
        session.select_option(option.axis, option.value)


def _is_selected(options: Mapping[str, str], argument: str) -> bool:
    axis, sep, value = argument.partition(OPTION_SEPARATOR)
    return bool(sep) and options.get(axis) == value


CLICK = ClickTool()
