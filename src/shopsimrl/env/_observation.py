"""The deterministic page text (docs/contract.md#observation, ``shopping-observation-v7``) and its reader.

The rendered text is the only page content a model sees; it is byte-compatible with the reference so that
traces and checkpoints made there stay valid here. The words that structure it (headings, line prefixes) are
this module's own: :func:`read_observation` is the renderer's inverse, so a policy that only sees the text
(behind the policy server, or an MCP client) reads the same ``observation_state`` fields the text shows, and
nothing outside this module parses page text. The state builders and checks live in ``_state``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..contract import (
    EXECUTED,
    INFORMATION_SUBPAGE,
    MISSING_TEXT,
    PRODUCT_DETAIL,
    REPLY_PREFIX,
    SEARCH_HOME,
    SEARCH_RESULTS,
    TERMINAL,
)
from ._state import FORBIDDEN_KEYS as FORBIDDEN_KEYS
from ._state import MAX_KEY_ATTRIBUTES as MAX_KEY_ATTRIBUTES
from ._state import MAX_PRODUCT_ID_LENGTH as MAX_PRODUCT_ID_LENGTH
from ._state import MAX_VALUES_PER_AXIS as MAX_VALUES_PER_AXIS
from ._state import check_observation_state as check_observation_state
from ._state import home_state as home_state
from ._state import is_product_id as is_product_id
from ._state import product_state as product_state
from ._state import product_summary as product_summary
from ._state import results_state as results_state
from ._state import terminal_state as terminal_state

MISSING = MISSING_TEXT
UNTITLED = "未命名商品"
ITEM_CACHE_SIZE = 8192  # rendered result items kept per process (the catalog is read-only)

# The first line of each page's text (docs/contract.md#observation); a text-only agent reads the page type here.
PAGE_HEADINGS: Mapping[str, str] = {
    SEARCH_HOME: "页面：搜索首页",
    SEARCH_RESULTS: "页面：搜索结果",
    PRODUCT_DETAIL: "页面：商品详情",
    INFORMATION_SUBPAGE: "页面：商品属性页",
    TERMINAL: "页面：任务已终止",
}
# Section headings and the line prefixes the reader relies on (docs/contract.md#observation-text).
PRODUCTS_HEADING = "商品列表："
PRODUCT_HEADING = "商品："
OPTIONS_HEADING = "规格选择："
LAST_ACTION_HEADING = "上次交互结果："
CAPABILITIES_HEADING = "页面能力："
CLICKABLES_HEADING = "可点击元素："
DIALOGUE_HEADING = "对话："
SECTION_HEADINGS = (PRODUCTS_HEADING, PRODUCT_HEADING, OPTIONS_HEADING, LAST_ACTION_HEADING,
                    CAPABILITIES_HEADING, CLICKABLES_HEADING)
SEARCH_TEXT_PREFIX = "搜索词："
RESULTS_LINE_PREFIX = "结果：第 "
RESULT_PREFIX = "- 结果："  # then 成功 or 无效
FEEDBACK_MESSAGE_PREFIX = "- 说明："
OPTION_VALUES_PREFIX = "  可选值："
SELECTED_PREFIX = "已选择 "
MISSING_AXES_PREFIX = "仍需选择："
NO_OPTIONS_LINE = "- 此商品没有规格选项"
SEARCH_CAPABILITY_LINE = "- 支持商品搜索"  # under 页面能力：
ASK_USER_CAPABILITY = "- 可以使用 ask_user 向顾客提问"  # the dialogue line while ask_user is offered
QUESTIONS_USED_UP = "- 提问次数已用完"


# --------------------------------------------------------------------------------------------- renderer


def _text(value: object) -> str:
    """A value as one line: whitespace runs collapsed to single spaces, ends trimmed."""
    return " ".join(str(value).split())


def _or(value: object, fallback: str) -> str:
    if value is None:
        return fallback
    return _text(value) or fallback


def display(value: object) -> str:
    """None or ``""`` → 未提供; dict/list/tuple → sorted-key JSON (``[299]``); anything else → its text."""
    if value is None or value == "":
        return MISSING
    if isinstance(value, (dict, list, tuple)):
        return _text(json.dumps(value, ensure_ascii=False, sort_keys=True))
    return _text(value)


def _attribute_line(prefix: str, attributes: object) -> str | None:
    if not isinstance(attributes, (list, tuple)) or not attributes:
        return None
    parts = [part for part in map(_text, attributes) if part]
    return f"{prefix}关键属性：{'；'.join(parts)}" if parts else None


def _item_text(asin: object, title: object, price: object, brand: object, category: object, attributes: object) -> str:
    """One result item without its rank: the title line's text and the indented sub-lines."""
    lines = [
        _or(title, UNTITLED),
        f"   ASIN：{asin}",
        f"   价格：{display(price)}",
        f"   品牌：{_or(brand, MISSING)}",
        f"   类别：{_or(category, MISSING)}",
    ]
    attribute_line = _attribute_line("   ", attributes)
    if attribute_line is not None:
        lines.append(attribute_line)
    return "\n".join(lines)


_cached_item_text = lru_cache(maxsize=ITEM_CACHE_SIZE)(_item_text)


def _render_item(product: Mapping[str, Any]) -> str:
    """A result item's text, memoised on its public fields: the same product renders identically every time."""
    asin = product["asin"]
    title = product.get("title")
    price = product.get("price")
    brand = product.get("brand")
    category = product.get("category")
    attributes: Any = product.get("key_attributes")
    if (
        (price is None or type(price) is str)
        and (title is None or type(title) is str)
        and (brand is None or type(brand) is str)
        and (category is None or type(category) is str)
        and type(attributes) in (list, tuple)
        and all(type(attribute) is str for attribute in attributes)
    ):
        return _cached_item_text(asin, title, price, brand, category, tuple(attributes))
    return _item_text(asin, title, price, brand, category, attributes)


def _results_lines(state: Mapping[str, Any], lines: list[str]) -> None:
    lines.append(PAGE_HEADINGS[SEARCH_RESULTS])
    lines.append(f"{SEARCH_TEXT_PREFIX}{_or(state.get('search_text'), MISSING)}")
    lines.append(
        f"{RESULTS_LINE_PREFIX}{state.get('page')}/{state.get('total_pages')} 页，共 {state.get('total_results')} 项，"
        f"当前显示排名 {state.get('rank_start')}-{state.get('rank_end')}"
    )
    lines.append("")
    lines.append(PRODUCTS_HEADING)
    products = state["products"]
    for product in products:
        lines.append(f"{product.get('rank')}. {_render_item(product)}")
    if not products:
        lines.append("（本页没有商品）")


def _product_lines(state: Mapping[str, Any], lines: list[str], subpage: bool) -> None:
    product = state["product"]
    price = state["selected_price"] if "selected_price" in state else product.get("price")
    lines.append(PAGE_HEADINGS[INFORMATION_SUBPAGE if subpage else PRODUCT_DETAIL])
    lines.append(PRODUCT_HEADING)
    lines.append(f"- 标题：{_or(product.get('title'), UNTITLED)}")
    lines.append(f"- ASIN：{product['asin']}")
    lines.append(f"- 价格：{display(price)}")
    lines.append(f"- 品牌：{_or(product.get('brand'), MISSING)}")
    lines.append(f"- 类别：{_or(product.get('category'), MISSING)}")
    attribute_line = _attribute_line("- ", product.get("key_attributes"))
    if attribute_line is not None:
        lines.append(attribute_line)
    lines.append("")
    lines.append(OPTIONS_HEADING)
    available = state["available_options"]
    selected = state["selected_options"]
    if available:
        for axis, values in available.items():
            if axis in selected:
                lines.append(f"- {_text(axis)}：{SELECTED_PREFIX}{_text(selected[axis])}")
            else:
                lines.append(f"- {_text(axis)}：尚未选择")
            if values:
                lines.append(f"{OPTION_VALUES_PREFIX}{' / '.join(map(_text, values))}")
    else:
        lines.append(NO_OPTIONS_LINE)
    missing = state.get("missing_option_axes")
    if missing:
        lines.append(f"{MISSING_AXES_PREFIX}{'、'.join(map(_text, missing))}")
    elif state.get("options_complete"):
        lines.append("规格状态：已选择全部规格，可以购买")
    invalid = state.get("invalid_selected_options")
    # The reference prints this only for a mapping, and the state holds a list, so it never appears
    # (docs/contract.md#deviations item 8); kept for byte compatibility.
    if isinstance(invalid, Mapping) and invalid:
        lines.append(f"无效的历史规格选择：{display(dict(invalid))}")
    if subpage:
        lines.append("")
        lines.append(f"子页面：{_or(state.get('subpage'), 'attributes')}")
        lines.append(f"内容：{display(state.get('content'))}")


def render_observation(state: Mapping[str, Any]) -> str:
    """The model-visible text of a checked ``observation_state``, ending in exactly one newline."""
    page_type = check_observation_state(state)
    lines: list[str] = []
    if page_type == SEARCH_HOME:
        lines.append(PAGE_HEADINGS[SEARCH_HOME])
    elif page_type == TERMINAL:
        lines.append(PAGE_HEADINGS[TERMINAL])
        lines.append("不能再执行操作。")
    elif page_type == SEARCH_RESULTS:
        _results_lines(state, lines)
    else:
        _product_lines(state, lines, page_type == INFORMATION_SUBPAGE)
    last = state.get("last_action")
    if isinstance(last, Mapping):
        lines.append("")
        lines.append(LAST_ACTION_HEADING)
        lines.append(RESULT_PREFIX + ("成功" if last.get("valid") else "无效"))
        message = last.get("message")
        if message:
            lines.append(f"{FEEDBACK_MESSAGE_PREFIX}{_text(message)}")
        reason = last.get("reason")
        if reason and reason != EXECUTED:
            lines.append(f"- 原因代码：{_text(reason)}")
    lines.append("")
    actions = state.get("actions") or ()
    search_available = bool(state.get("search_available"))
    if search_available:
        lines.append(CAPABILITIES_HEADING)
        lines.append(SEARCH_CAPABILITY_LINE)
        if actions:
            lines.append("")
    if actions:
        lines.append(CLICKABLES_HEADING)
        lines.extend(f"- {_text(action)}" for action in actions)
    if not search_available and not actions:
        lines.append("当前页面没有可交互元素。")
    return "\n".join(lines).strip() + "\n"


def dialogue_lines(dialogue: Mapping[str, Any]) -> str:
    """The dialogue part of the observation text (appended after the page)."""
    asked, limit = dialogue.get("questions_asked", 0), dialogue.get("max_questions", 0)
    if dialogue.get("ask_user_available"):
        return f"\n{DIALOGUE_HEADING}\n{ASK_USER_CAPABILITY}（已提问 {asked}/{limit} 次）\n"
    return f"\n{DIALOGUE_HEADING}\n{QUESTIONS_USED_UP}（已提问 {asked}/{limit} 次）\n"


def render_dialogue_observation(state: Mapping[str, Any]) -> str:
    """The page text followed, on non-terminal pages of a dialogue episode, by the dialogue lines."""
    text = render_observation(state)
    dialogue = state.get("dialogue")
    if isinstance(dialogue, Mapping) and state.get("page_type") != TERMINAL:
        text += dialogue_lines(dialogue)
    return text


# --------------------------------------------------------------------------------------------- reader

_PAGE_TYPES = {heading: kind for kind, heading in PAGE_HEADINGS.items()}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_RANK_LINE = re.compile(r"^(\d+)\. (.*)$")
_FIELDS = {"ASIN": "asin", "价格": "price", "品牌": "brand", "类别": "category", "关键属性": "key_attributes",
           "标题": "title"}


def _field(item: dict[str, Any], key: str, value: str) -> None:
    name = _FIELDS.get(key)
    if name == "key_attributes":
        item[name] = [part for part in value.split("；") if part]
    elif name is not None:
        item[name] = value


def read_observation(text: str) -> dict[str, Any]:
    """The ``observation_state`` fields a page text shows, read back from :func:`render_observation`'s output
    (with the dialogue lines): ``page_type`` (``"unknown"`` for a foreign first line), ``search_available``,
    ``actions``, the results' ``search_text``/``page``/``total_pages``/``products``, the product page's
    ``product``/``available_options``/``selected_options``/``missing_option_axes``, ``last_action``
    (``valid``, ``message``, and the shopper's ``reply``) and ``dialogue`` (``ask_user_available``).

    Values are as displayed (one line each, ``未提供`` for a missing one); unknown lines are ignored, so a
    newer renderer degrades gracefully. One pass over the lines (linear time).
    """
    lines = text.splitlines()
    state: dict[str, Any] = {"page_type": _PAGE_TYPES.get(lines[0] if lines else "", "unknown"),
                             "search_available": False, "actions": []}
    section = ""
    current: dict[str, Any] | None = None
    axis: str | None = None
    for line in lines[1:]:
        if line in SECTION_HEADINGS or line == DIALOGUE_HEADING:
            section = line
            continue
        if not line:
            continue
        if section == CLICKABLES_HEADING and line.startswith("- "):
            state["actions"].append(line[2:])
        elif section == CAPABILITIES_HEADING and line == SEARCH_CAPABILITY_LINE:
            state["search_available"] = True
        elif section == DIALOGUE_HEADING:
            numbers = _NUMBER.findall(line)
            dialogue: dict[str, Any] = {"ask_user_available": line.startswith(ASK_USER_CAPABILITY)}
            if len(numbers) >= 2:
                dialogue["questions_asked"], dialogue["max_questions"] = int(numbers[-2]), int(numbers[-1])
            state["dialogue"] = dialogue
        elif section == LAST_ACTION_HEADING and line.startswith(RESULT_PREFIX):
            state["last_action"] = {"valid": line.endswith("成功")}
        elif section == LAST_ACTION_HEADING and line.startswith(FEEDBACK_MESSAGE_PREFIX) and "last_action" in state:
            message = line[len(FEEDBACK_MESSAGE_PREFIX):]
            state["last_action"]["message"] = message
            if message.startswith(REPLY_PREFIX):
                state["last_action"]["reply"] = message[len(REPLY_PREFIX):]
        elif line.startswith(SEARCH_TEXT_PREFIX):
            state["search_text"] = line.split("：", 1)[1]
        elif line.startswith(RESULTS_LINE_PREFIX):
            numbers = _NUMBER.findall(line)
            if len(numbers) >= 2:
                state["page"], state["total_pages"] = int(numbers[0]), int(numbers[1])
        elif section == PRODUCTS_HEADING:
            rank_match = _RANK_LINE.match(line)
            if rank_match and not line.startswith("   "):
                current = {"rank": int(rank_match.group(1)), "title": rank_match.group(2)}
                state.setdefault("products", []).append(current)
            elif current is not None and "：" in line:
                key, value = line.strip().split("：", 1)
                _field(current, key, value)
        elif section == PRODUCT_HEADING and line.startswith("- ") and "：" in line:
            key, value = line[2:].split("：", 1)
            _field(state.setdefault("product", {}), key, value)
        elif section == OPTIONS_HEADING:
            available = state.setdefault("available_options", {})
            if line.startswith(OPTION_VALUES_PREFIX) and axis is not None:
                available[axis] = line.split("：", 1)[1].split(" / ")
            elif line.startswith("- ") and "：" in line and line != NO_OPTIONS_LINE:
                axis, shown = line[2:].rsplit("：", 1)
                available.setdefault(axis, [])
                if shown.startswith(SELECTED_PREFIX):
                    state.setdefault("selected_options", {})[axis] = shown[len(SELECTED_PREFIX):]
            elif line.startswith(MISSING_AXES_PREFIX):
                state["missing_option_axes"] = line.split("：", 1)[1].split("、")
    return state


__all__ = [
    "check_observation_state",
    "display",
    "home_state",
    "is_product_id",
    "product_state",
    "product_summary",
    "read_observation",
    "render_dialogue_observation",
    "render_observation",
    "results_state",
    "terminal_state",
]
