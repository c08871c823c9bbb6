"""``observation_state`` builders and checks (docs/contract.md#observation-state, ``shopping-observation-v7``).

Builders are pure functions over plain data and never copy their inputs (the caller owns them and must not
mutate shared ones afterwards); :func:`check_observation_state` refuses any state that could leak the private
goal or break the page contract. The text a model sees is rendered from a checked state by ``_observation``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from ..contract import (
    BUTTON_LABELS,
    INFORMATION_SUBPAGE,
    PAGE_TYPES,
    PRODUCT_DETAIL,
    SEARCH_BUTTON,
    SEARCH_HOME,
    SEARCH_RESULTS,
    TERMINAL,
)
from ..errors import DataError
from ..versions import OBSERVATION_VERSION, PAGE_SIZE
from ._variant_price import price_display

FORBIDDEN_KEYS = frozenset({"goal", "reward", "reward_detail", "target_asin", "answer"})
MAX_KEY_ATTRIBUTES = 10
MAX_VALUES_PER_AXIS = 100
MAX_PRODUCT_ID_LENGTH = 20


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
        raise DataError("structured observation: actions must be a list of strings", code="observation")
    return actions


def _check_hidden(mapping: Mapping[str, Any], where: str) -> None:
    if not FORBIDDEN_KEYS.isdisjoint(mapping):
        hidden = sorted(FORBIDDEN_KEYS.intersection(mapping))
        raise DataError(f"structured observation contains hidden-answer keys in {where}: {hidden}", code="observation")


def check_observation_state(state: object) -> str:
    """Every docs/contract.md#observation-checks check; returns the page type or raises DataError."""
    if not isinstance(state, Mapping):
        raise DataError("structured observation must be a mapping", code="observation")
    if state.get("observation_version") != OBSERVATION_VERSION:
        raise DataError("unsupported observation_state version", code="observation")
    _check_hidden(state, "the state")
    page_type = state.get("page_type")
    if not isinstance(page_type, str) or page_type not in PAGE_TYPES:
        raise DataError(f"structured observation: unknown page_type {page_type!r}", code="observation")
    actions = _check_actions(state.get("actions", []))
    if page_type == SEARCH_RESULTS:
        products = state.get("products")
        if not isinstance(products, list):
            raise DataError("structured observation: products must be a list", code="observation")
        if len(products) > PAGE_SIZE:
            raise DataError("search page exceeds the frozen page size of 20", code="observation")
        asins: set[str] = set()
        for product in products:
            if not isinstance(product, Mapping):
                raise DataError("structured observation: a search product is not a mapping", code="observation")
            asin = product.get("asin")
            if not is_product_id(asin):
                raise DataError(f"structured observation: invalid product ASIN {asin!r}", code="observation")
            _check_hidden(product, "a search product")
            asins.add(asin.casefold())
        actionable = {action.casefold() for action in actions if is_product_id(action)}
        if asins != actionable:
            raise DataError("model-visible search ASINs differ from environment-actionable ASINs", code="observation")
    elif page_type in (PRODUCT_DETAIL, INFORMATION_SUBPAGE):
        product = state.get("product")
        if not isinstance(product, Mapping):
            raise DataError("structured observation: product must be a mapping", code="observation")
        if not is_product_id(product.get("asin")):
            raise DataError(f"structured observation: invalid product ASIN {product.get('asin')!r}", code="observation")
        _check_hidden(product, "the product")
        if not isinstance(state.get("selected_options"), Mapping):
            raise DataError("structured observation: selected_options must be a mapping", code="observation")
        if not isinstance(state.get("available_options"), Mapping):
            raise DataError("structured observation: available_options must be a mapping", code="observation")
    return page_type
