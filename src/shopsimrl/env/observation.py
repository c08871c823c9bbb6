"""``observation_state`` builders and the deterministic text renderer (env_spec §5, ``shopping-observation-v7``).

The rendered text is the only page content a model sees; it is byte-compatible with the reference so that
traces and checkpoints made there stay valid here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ObservationError
from ..versions import OBSERVATION_VERSION, PAGE_SIZE
from .variant_price import price_display

FORBIDDEN_KEYS = frozenset({"goal", "reward", "reward_detail", "target_asin", "answer"})
PAGE_TYPES = ("search_home", "search_results", "product_detail", "information_subpage", "terminal")
BUTTON_LABELS = frozenset({"back to search", "< prev", "next >", "buy now", "attributes", "search"})
_PRODUCT_ID = re.compile(r"[A-Za-z0-9]{1,20}")
_WHITESPACE = re.compile(r"\s+")
MISSING = "未提供"


def is_product_id(value: object) -> bool:
    return isinstance(value, str) and value not in BUTTON_LABELS and _PRODUCT_ID.fullmatch(value) is not None


def product_summary(product: Mapping[str, Any], rank: int | None = None) -> dict[str, Any]:
    """The public product facts shown in result lists and on the product page."""
    attributes = product.get("attribute", product.get("Attributes")) or []
    price = product.get("Price")
    if price is None:
        price = price_display(product.get("pricing"))
    summary: dict[str, Any] = {
        "asin": product.get("asin"),
        "title": product.get("title") or product.get("Title") or "",
        "brand": product.get("brand") or product.get("shop_name") or "",
        "category": product.get("category") or "",
        "price": price,
        "key_attributes": [text for text in (str(a) for a in list(attributes)[:10]) if text.strip()],
    }
    if rank is not None:
        summary["rank"] = rank
    return summary


def _common(page_type: str, search_available: bool, actions: Sequence[str], last_action: Mapping[str, Any] | None) -> dict[str, Any]:
    state: dict[str, Any] = {
        "observation_version": OBSERVATION_VERSION,
        "page_type": page_type,
        "search_available": search_available,
        "actions": [a for a in actions if a.casefold() != "search"],
    }
    if last_action is not None:
        state["last_action"] = last_action
    return state


def home_state(last_action: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return _common("search_home", True, [], last_action)


def terminal_state(last_action: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return _common("terminal", False, [], last_action)


def results_state(
    *, search_text: str, normalized_search_text: str, page: int, total_pages: int, total_results: int,
    products: list[dict[str, Any]], actions: Sequence[str], last_action: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    state = _common("search_results", False, actions, last_action)
    ranks = [p["rank"] for p in products if isinstance(p.get("rank"), int)]
    state.update(
        search_text=search_text,
        normalized_search_text=normalized_search_text,
        page=page,
        total_pages=total_pages,
        total_results=total_results,
        rank_start=min(ranks) if ranks else 0,
        rank_end=max(ranks) if ranks else 0,
        products=products,
    )
    return state


def product_state(
    *, product_summary: dict[str, Any], selected_options: dict[str, str], available_options: dict[str, list[str]],
    missing_option_axes: list[str], options_complete: bool, invalid_selected_options: list[dict[str, str]],
    selected_price: float | None, actions: Sequence[str], last_action: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    state = _common("product_detail", False, actions, last_action)
    summary = {k: v for k, v in product_summary.items() if k != "rank"}
    state.update(
        product=summary,
        selected_options=selected_options,
        available_options=available_options,
        missing_option_axes=missing_option_axes,
        options_complete=options_complete,
    )
    if invalid_selected_options:
        state["invalid_selected_options"] = invalid_selected_options
    if selected_price is not None:
        state["selected_price"] = selected_price
    return state


def _clean(value: object) -> str:
    return _WHITESPACE.sub(" ", str(value)).strip()


def _display(value: object) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _clean(value)


def _or(value: object, fallback: str) -> str:
    text = _clean(value) if value is not None else ""
    return text or fallback


def _check(state: Mapping[str, Any]) -> str:
    if not isinstance(state, Mapping):
        raise ObservationError("structured observation must be a mapping")
    if state.get("observation_version") != OBSERVATION_VERSION:
        raise ObservationError("structured observation: unsupported observation_state version")
    hidden = FORBIDDEN_KEYS.intersection(state)
    if hidden:
        raise ObservationError(f"structured observation contains hidden-answer keys: {sorted(hidden)}")
    page_type = state.get("page_type")
    if page_type not in PAGE_TYPES:
        raise ObservationError(f"structured observation: unknown page_type {page_type!r}")
    if page_type == "search_results":
        products = state.get("products")
        if not isinstance(products, list):
            raise ObservationError("structured observation: products must be a list")
        if len(products) > PAGE_SIZE:
            raise ObservationError("search page exceeds the frozen page size of 20")
        asins = set()
        for product in products:
            if not isinstance(product, Mapping) or not is_product_id(product.get("asin")):
                raise ObservationError("structured observation: invalid product on the search page")
            asins.add(str(product["asin"]).casefold())
        actionable = {a.casefold() for a in state.get("actions", []) if is_product_id(a)}
        if asins != actionable:
            raise ObservationError("model-visible search ASINs differ from environment-actionable ASINs")
    elif page_type in ("product_detail", "information_subpage"):
        product = state.get("product")
        if not isinstance(product, Mapping) or not is_product_id(product.get("asin")):
            raise ObservationError("structured observation: invalid product on the product page")
        if not isinstance(state.get("selected_options"), Mapping) or not isinstance(state.get("available_options"), Mapping):
            raise ObservationError("structured observation: options must be mappings")
    return page_type


def _results_lines(state: Mapping[str, Any]) -> list[str]:
    lines = [
        "页面：搜索结果",
        f"搜索词：{_or(state.get('search_text'), MISSING)}",
        f"结果：第 {state.get('page')}/{state.get('total_pages')} 页，共 {state.get('total_results')} 项，"
        f"当前显示排名 {state.get('rank_start')}-{state.get('rank_end')}",
        "",
        "商品列表：",
    ]
    products = state.get("products") or []
    for product in products:
        lines.append(f"{product.get('rank')}. {_or(product.get('title'), '未命名商品')}")
        lines.append(f"   ASIN：{product.get('asin')}")
        lines.append(f"   价格：{_display(product.get('price'))}")
        lines.append(f"   品牌：{_or(product.get('brand'), MISSING)}")
        lines.append(f"   类别：{_or(product.get('category'), MISSING)}")
        attributes = [_clean(a) for a in product.get("key_attributes") or [] if _clean(a)]
        if attributes:
            lines.append(f"   关键属性：{'；'.join(attributes)}")
    if not products:
        lines.append("（本页没有商品）")
    return lines


def _product_lines(state: Mapping[str, Any], subpage: bool) -> list[str]:
    product = state["product"]
    price = state["selected_price"] if "selected_price" in state else product.get("price")
    lines = [
        "页面：商品属性页" if subpage else "页面：商品详情",
        "商品：",
        f"- 标题：{_or(product.get('title'), '未命名商品')}",
        f"- ASIN：{product.get('asin')}",
        f"- 价格：{_display(price)}",
        f"- 品牌：{_or(product.get('brand'), MISSING)}",
        f"- 类别：{_or(product.get('category'), MISSING)}",
    ]
    attributes = [_clean(a) for a in product.get("key_attributes") or [] if _clean(a)]
    if attributes:
        lines.append(f"- 关键属性：{'；'.join(attributes)}")
    lines += ["", "规格选择："]
    available = state.get("available_options") or {}
    selected = state.get("selected_options") or {}
    if available:
        for axis, values in available.items():
            if axis in selected:
                lines.append(f"- {axis}：已选择 {_clean(selected[axis])}")
            else:
                lines.append(f"- {axis}：尚未选择")
            if values:
                lines.append(f"  可选值：{' / '.join(_clean(v) for v in values)}")
    else:
        lines.append("- 此商品没有规格选项")
    missing = state.get("missing_option_axes") or []
    if missing:
        lines.append(f"仍需选择：{'、'.join(missing)}")
    elif state.get("options_complete"):
        lines.append("规格状态：已选择全部规格，可以购买")
    invalid = state.get("invalid_selected_options")
    if isinstance(invalid, Mapping) and invalid:  # a list in practice, so never printed (reference quirk kept)
        lines.append(f"无效的历史规格选择：{json.dumps(invalid, ensure_ascii=False, sort_keys=True)}")
    if subpage:
        lines += ["", f"子页面：{_or(state.get('subpage'), 'attributes')}", f"内容：{_display(state.get('content'))}"]
    return lines


def render_observation(state: Mapping[str, Any]) -> str:
    page_type = _check(state)
    if page_type == "search_home":
        lines = ["页面：搜索首页"]
    elif page_type == "terminal":
        lines = ["页面：任务已终止", "不能再执行操作。"]
    elif page_type == "search_results":
        lines = _results_lines(state)
    else:
        lines = _product_lines(state, page_type == "information_subpage")
    last = state.get("last_action")
    if isinstance(last, Mapping):
        lines += ["", "上次交互结果：", f"- 结果：{'成功' if last.get('valid') else '无效'}"]
        message = last.get("message")
        if message:
            lines.append(f"- 说明：{message}")
        reason = last.get("reason")
        if reason and reason != "executed":
            lines.append(f"- 原因代码：{reason}")
    lines.append("")
    actions = state.get("actions") or []
    if state.get("search_available"):
        lines += ["页面能力：", "- 支持商品搜索"]
        if actions:
            lines.append("")
    if actions:
        lines.append("可点击元素：")
        lines.extend(f"- {action}" for action in actions)
    if not state.get("search_available") and not actions:
        lines.append("当前页面没有可交互元素。")
    return "\n".join(lines).strip() + "\n"
