"""``observation_state`` builders and the deterministic text renderer (docs/contract.md#observation, ``shopping-observation-v7``).

The rendered text is the only page content a model sees; it is byte-compatible with the reference so that
traces and checkpoints made there stay valid here. Builders are pure functions over plain data and never
copy their inputs (the caller owns them and must not mutate shared ones afterwards); the renderer refuses
any state that could leak the private goal or break the page contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from ..bounded_cache import ITEM_TEXT_BYTES, BoundedMemo, strings_bytes, text_bytes
from ..contract import (
    BUTTON_LABELS,
    CAPABILITIES_HEADING,
    CLICKABLES_HEADING,
    EXECUTED,
    FEEDBACK_MESSAGE_PREFIX,
    INFORMATION_SUBPAGE,
    LAST_ACTION_HEADING,
    MISSING_AXES_PREFIX,
    NO_OPTIONS_LINE,
    OPTION_VALUES_PREFIX,
    OPTIONS_HEADING,
    PAGE_HEADINGS,
    PAGE_TYPES,
    PRODUCT_DETAIL,
    PRODUCT_HEADING,
    PRODUCTS_HEADING,
    RESULT_PREFIX,
    RESULTS_LINE_PREFIX,
    SEARCH_BUTTON,
    SEARCH_CAPABILITY_LINE,
    SEARCH_HOME,
    SEARCH_RESULTS,
    SEARCH_TEXT_PREFIX,
    SELECTED_PREFIX,
    TERMINAL,
)
from ..contract import MISSING_TEXT as MISSING
from ..errors import ObservationError
from ..versions import OBSERVATION_VERSION, PAGE_SIZE
from ._variant_price import price_display

FORBIDDEN_KEYS = frozenset({"goal", "reward", "reward_detail", "target_asin", "answer"})
MAX_KEY_ATTRIBUTES = 10
MAX_VALUES_PER_AXIS = 100
UNTITLED = "未命名商品"
MAX_PRODUCT_ID_LENGTH = 20
ITEM_CACHE_SIZE = 8192  # rendered result items kept per process (the catalog is read-only)


def is_product_id(value: object) -> TypeGuard[str]:
    """A product link label: 1–20 ASCII letters or digits that is not a button label (docs/contract.md#observation-checks)."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_PRODUCT_ID_LENGTH
        and value.isascii()
        and value.isalnum()
        and value not in BUTTON_LABELS
    )


# --------------------------------------------------------------------------------------------- builders


def product_summary(product: Mapping[str, Any], rank: int | None = None) -> dict[str, Any]:
    """The public facts of an archive-format product shown in result lists and on its page (docs/contract.md#observation-state).

    ``brand`` is ``shop_name`` whenever the record has one: the reference loader deletes ``brand``, so that
    is what it shows; ``brand`` is only the fallback. ``price`` is the ``Price`` string (None without
    ``pricing``, rendered ``未提供``).
    """
    shop_name = product.get("shop_name")
    brand = shop_name if shop_name is not None else product.get("brand")
    attributes = product.get("attribute")
    if attributes is None:
        attributes = product.get("Attributes")
    if isinstance(attributes, str):
        attributes = [attributes]
    elif not isinstance(attributes, (list, tuple)):
        attributes = []
    key_attributes = [text for text in map(str, attributes[:MAX_KEY_ATTRIBUTES]) if text.strip()]
    price = product.get("Price")
    if price is None:
        price = price_display(product.get("pricing"))
    asin = product.get("asin")
    summary: dict[str, Any] = {
        "asin": None if asin is None else str(asin),
        "title": product.get("title") or product.get("Title") or "",
        "brand": brand or "",
        "category": product.get("category") or "",
        "price": price,
        "key_attributes": key_attributes,
    }
    if rank is not None:
        summary["rank"] = rank
    return summary


def _common(
    page_type: str, search_available: bool, actions: Sequence[str], last_action: Mapping[str, Any] | None
) -> dict[str, Any]:
    state: dict[str, Any] = {
        "observation_version": OBSERVATION_VERSION,
        "page_type": page_type,
        "search_available": search_available,
        "actions": [a for a in actions if not (isinstance(a, str) and a.casefold() == SEARCH_BUTTON)],
    }
    if last_action is not None:
        state["last_action"] = last_action
    return state


def home_state(last_action: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The search home: search available, nothing to click; no ``last_action`` right after reset."""
    return _common(SEARCH_HOME, True, (), last_action)


def terminal_state(last_action: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The page shown once an episode has ended (on every termination, not only purchases)."""
    return _common(TERMINAL, False, (), last_action)


def results_state(
    search_text: str,
    normalized_search_text: str,
    page: int,
    total_pages: int,
    total_results: int,
    products: list[dict[str, Any]],
    actions: Sequence[str],
    last_action: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One results page; ``products`` are summaries with ``rank`` (global, 1-based), in rank order."""
    state = _common(SEARCH_RESULTS, False, actions, last_action)
    rank_start = rank_end = 0
    for product in products:
        rank = product.get("rank")
        if isinstance(rank, int):
            if rank_start == 0 or rank < rank_start:
                rank_start = rank
            if rank > rank_end:
                rank_end = rank
    state["search_text"] = search_text
    state["normalized_search_text"] = normalized_search_text
    state["page"] = page
    state["total_pages"] = total_pages
    state["total_results"] = total_results
    state["rank_start"] = rank_start
    state["rank_end"] = rank_end
    state["products"] = products
    return state


def product_state(
    product_summary: Mapping[str, Any],
    selected_options: Mapping[str, str],
    available_options: Mapping[str, Sequence[str]],
    missing_option_axes: list[str],
    options_complete: bool,
    invalid_selected_options: list[dict[str, str]] | None,
    selected_price: float | None,
    actions: Sequence[str],
    last_action: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A product page; ``invalid_selected_options`` / ``selected_price`` appear only when non-empty / not None."""
    state = _common(PRODUCT_DETAIL, False, actions, last_action)
    if "rank" in product_summary:
        product_summary = {key: value for key, value in product_summary.items() if key != "rank"}
    if any(len(values) > MAX_VALUES_PER_AXIS for values in available_options.values()):
        available_options = {axis: list(values[:MAX_VALUES_PER_AXIS]) for axis, values in available_options.items()}
    state["product"] = product_summary
    state["selected_options"] = selected_options
    state["available_options"] = available_options
    state["missing_option_axes"] = missing_option_axes
    state["options_complete"] = options_complete
    if invalid_selected_options:
        state["invalid_selected_options"] = invalid_selected_options
    if selected_price is not None:
        state["selected_price"] = selected_price
    return state


# --------------------------------------------------------------------------------------------- checks


def _check_actions(actions: object) -> Sequence[str]:
    if not isinstance(actions, (list, tuple)) or not all(isinstance(action, str) for action in actions):
        raise ObservationError("structured observation: actions must be a list of strings")
    return actions


def _check_hidden(mapping: Mapping[str, Any], where: str) -> None:
    if not FORBIDDEN_KEYS.isdisjoint(mapping):
        hidden = sorted(FORBIDDEN_KEYS.intersection(mapping))
        raise ObservationError(f"structured observation contains hidden-answer keys in {where}: {hidden}")


def check_observation_state(state: object) -> str:
    """Every docs/contract.md#observation-checks check; returns the page type or raises ObservationError."""
    if not isinstance(state, Mapping):
        raise ObservationError("structured observation must be a mapping")
    if state.get("observation_version") != OBSERVATION_VERSION:
        raise ObservationError("unsupported observation_state version")
    _check_hidden(state, "the state")
    page_type = state.get("page_type")
    if not isinstance(page_type, str) or page_type not in PAGE_TYPES:
        raise ObservationError(f"structured observation: unknown page_type {page_type!r}")
    actions = _check_actions(state.get("actions", []))
    if page_type == SEARCH_RESULTS:
        products = state.get("products")
        if not isinstance(products, list):
            raise ObservationError("structured observation: products must be a list")
        if len(products) > PAGE_SIZE:
            raise ObservationError("search page exceeds the frozen page size of 20")
        asins: set[str] = set()
        for product in products:
            if not isinstance(product, Mapping):
                raise ObservationError("structured observation: a search product is not a mapping")
            asin = product.get("asin")
            if not is_product_id(asin):
                raise ObservationError(f"structured observation: invalid product ASIN {asin!r}")
            _check_hidden(product, "a search product")
            asins.add(asin.casefold())
        actionable = {action.casefold() for action in actions if is_product_id(action)}
        if asins != actionable:
            raise ObservationError("model-visible search ASINs differ from environment-actionable ASINs")
    elif page_type in (PRODUCT_DETAIL, INFORMATION_SUBPAGE):
        product = state.get("product")
        if not isinstance(product, Mapping):
            raise ObservationError("structured observation: product must be a mapping")
        if not is_product_id(product.get("asin")):
            raise ObservationError(f"structured observation: invalid product ASIN {product.get('asin')!r}")
        _check_hidden(product, "the product")
        if not isinstance(state.get("selected_options"), Mapping):
            raise ObservationError("structured observation: selected_options must be a mapping")
        if not isinstance(state.get("available_options"), Mapping):
            raise ObservationError("structured observation: available_options must be a mapping")
    return page_type


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


_cached_item_text = BoundedMemo(_item_text, maxsize=ITEM_CACHE_SIZE, max_bytes=ITEM_TEXT_BYTES,
                                size_of=lambda args, text: strings_bytes(args[:5]) + strings_bytes(args[5]) + text_bytes(text))


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
