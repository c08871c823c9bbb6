"""What the learned policy decides between, and the public features it scores each choice by.

Every decision of an episode is one of four kinds, each a choice among candidate actions of the current page:

- ``search``: which query to type (built from the visible request, its clauses and the persona's recent
  searches that share words with it);
- ``results``: which listed product to open, or the next page, or back to search;
- ``option``: which value of the first unselected option axis to click, or back to the results;
- ``buy``: buy now, or back to the results.

A candidate's features are a fixed-length vector per kind (:data:`FEATURES` names each one, in order). They are
computed from the :class:`~shopsimrl.agent.policy.PolicyContext` alone — the visible request, the public persona,
the page text and the earlier turns — with the same readers the heuristic uses, so a change to any private goal
field cannot change them (tested). Pages with no decision (the terminal page, an unknown page) are ``None``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ...contract import BACK_TO_SEARCH as BACK
from ...contract import BUY_NOW as BUY
from ...contract import NEXT, PREV, PRODUCT_DETAIL, SEARCH_RESULTS, SEARCH_TOOL, format_action, option_label
from ...versions import EPISODE_LIMITS
from ..page_text import Page, PageItem
from ..policy import PolicyAction, PolicyContext
from .heuristic import Request, parse_page, terms

SEARCH, RESULTS, OPTION, BUY_KIND = "search", "results", "option", "buy"
KINDS = (SEARCH, RESULTS, OPTION, BUY_KIND)
QUERY_KINDS = ("request", "clean", "clean+evidence", "clean+top-evidence", "last-clause", "longest-clause",
               "top-evidence", "clean+preferences")
_TURNS = float(max(EPISODE_LIMITS.values()))
_SEARCH_PREFIX = format_action(SEARCH_TOOL, "")[:-1]  # "search[": how a search action opens
# Words real listings use for an accessory or a companion of another product (not the product itself).
ACCESSORY_WORDS = ("适用", "专用", "搭配", "配件", "平替", "兼容")
# Chinese numerals as digits (a request says 两个装 where the option reads 2个装).
_NUMERALS = str.maketrans({"两": "2", "二": "2", "三": "3", "四": "4", "五": "5", "六": "6", "七": "7", "八": "8",
                           "九": "9", "十": "10", "一": "1"})
_LOW_WORDS = ("最小", "最便宜", "最低", "小一点", "便宜点", "小的", "少一点")
_HIGH_WORDS = ("最大", "最高", "大一点", "大的", "多一点", "最多")

# Feature names per decision kind; the vectors below follow this order exactly (a test holds them together).
FEATURES: dict[str, tuple[str, ...]] = {
    SEARCH: (
        *(f"query={kind}" for kind in QUERY_KINDS),
        *(f"query={kind}&has_evidence" for kind in QUERY_KINDS),
        "query_used_before", "query_length/20", "searches_so_far/3",
    ),
    RESULTS: (
        "is_item", "is_next", "is_back",
        "item:1/rank", "item:rank<=3", "item:request_cover", "item:request_cover-best", "item:is_best_cover",
        "item:evidence_cover", "item:leaf_in_request", "item:leaf_cover", "item:leaf_in_evidence",
        "item:preference_hits/3", "item:attributes_in_request/3", "item:brand_preferred", "item:brand_browsed",
        "item:has_budget", "item:over_budget", "item:fits_budget", "item:log_price/budget",
        "item:in_persona_price_range", "item:attributes_in_evidence/3", "item:attribute_chars_in_request",
        "item:opened_before", "item:accessory_word",
        "next:page/total", "next:opened/4", "back:searches/3", "back:opened/4", "turn/limit",
    ),
    OPTION: (
        "is_value", "is_prev",
        "value:in_request", "value:in_request*length/6", "value:request_cover", "value:evidence_cover",
        "value:size_word", "value:preference_word", "value:parts_named", "value:parts_unnamed/3",
        "value:first", "value:last", "value:position", "value:axis_in_request", "value:values/6",
        "value:in_request_numerals", "value:first&request_says_low", "value:last&request_says_high",
        "prev:over_budget", "prev:request_cover", "prev:opened/4",
    ),
    BUY_KIND: (
        "is_buy", "is_prev",
        "buy:fits_budget", "buy:over_budget", "buy:no_budget", "buy:request_cover", "buy:leaf_in_request",
        "buy:opened_before", "buy:turn/limit", "buy:attributes_in_request/3", "buy:evidence_cover",
        "buy:attribute_chars_in_request",
        "prev:untried_candidates/4", "prev:opened/4", "prev:turn/limit",
    ),
}


@dataclass(frozen=True)
class Decision:
    """One choice of one kind: the candidate actions and a feature row for each (same order)."""

    kind: str
    actions: tuple[PolicyAction, ...]
    features: tuple[tuple[float, ...], ...]


@lru_cache(maxsize=1024)
def _request(instruction: str, persona_json: str) -> Request:
    return Request(instruction, json.loads(persona_json))


def _persona_strings(persona: Mapping[str, Any], section: str, key: str) -> list[str]:
    block = persona.get(section) if isinstance(persona, Mapping) else None
    value = block.get(key) if isinstance(block, Mapping) else None
    return [str(item) for item in value if isinstance(item, str)] if isinstance(value, list) else []


@dataclass(frozen=True)
class _Public:
    """The request and persona facts the features read, parsed once per task."""

    request: Request
    instruction: str
    numerals: str  # the instruction with Chinese numerals as digits
    says_low: bool  # the request asks for the small or cheap end of something
    says_high: bool
    brands: tuple[str, ...]
    browsed: tuple[str, ...]
    price_range: tuple[float, float] | None


@lru_cache(maxsize=1024)
def _public(instruction: str, persona_json: str) -> _Public:
    persona = json.loads(persona_json)
    interests = persona.get("兴趣偏好") if isinstance(persona, Mapping) else None
    brands = tuple(_persona_strings(persona, "兴趣偏好", "品牌偏好"))
    browsed = tuple(_persona_strings(persona, "行为特征", "最近浏览商品") + _persona_strings(persona, "行为特征", "收藏商品"))
    prefs = interests.get("商品属性偏好") if isinstance(interests, Mapping) else None
    bounds = prefs.get("价格区间") if isinstance(prefs, Mapping) else None
    price_range = None
    if isinstance(bounds, Mapping):
        low, high = bounds.get("最小值"), bounds.get("最大值")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)):
            price_range = (float(low), float(high))
    return _Public(_request(instruction, persona_json), instruction, instruction.translate(_NUMERALS),
                   any(word in instruction for word in _LOW_WORDS), any(word in instruction for word in _HIGH_WORDS),
                   brands, browsed, price_range)


def _cover(text_terms: frozenset[str] | set[str], wanted: frozenset[str] | set[str]) -> float:
    return len(text_terms & wanted) / len(wanted) if wanted else 0.0


def _leaf(item: PageItem) -> str:
    return item.category.split("›")[-1].strip()


def _item_terms(item: PageItem) -> frozenset[str]:
    return terms(item.title + " " + " ".join(item.attributes))


def _opened(history: Sequence[Any]) -> list[str]:
    out = []
    for turn in history:
        page = parse_page(turn.observation)
        if page.kind == PRODUCT_DETAIL and page.product is not None:
            out.append(page.product.asin)
    return out


def _searches(history: Sequence[Any]) -> list[str]:
    return [turn.action for turn in history if turn.action.startswith(_SEARCH_PREFIX)]


def _budget_features(public: _Public, item: PageItem) -> tuple[float, float, float, float]:
    """has budget, over it at the lowest price, fits it at the highest, log(lowest price / budget) clipped."""
    budget, bounds = public.request.budget, item.price_bounds()
    if budget is None or bounds is None or budget <= 0:
        return (0.0, 0.0, 0.0, 0.0)
    ratio = math.log(max(bounds[0], 0.01) / budget)
    return (1.0, float(bounds[0] > budget), float(bounds[1] <= budget), max(-3.0, min(3.0, ratio)))


def _query_candidates(public: _Public) -> list[str]:
    request = public.request
    evidence = sorted(request.evidence, key=lambda query: (-len(terms(query) & request.terms), query))
    clauses = request.clauses or [request.text]
    clean = request.text or public.instruction.strip()
    top = evidence[0] if evidence else ""
    preferences = [word for word in request.preference_words if word not in clean][:2]
    return [
        public.instruction.strip(), clean, request.query(), f"{clean} {top}".strip(), clauses[-1],
        max(clauses, key=len), top or clean, " ".join([clean, *preferences]).strip(),
    ]


def _search_decision(public: _Public, context: PolicyContext) -> Decision:
    used = {action[len(_SEARCH_PREFIX) : -1] for action in _searches(context.history)}
    has_evidence = float(bool(public.request.evidence))
    width = len(QUERY_KINDS)
    rows, actions = [], []
    for index, query in enumerate(_query_candidates(public)):
        query = query or "商品"
        row = [0.0] * (2 * width)
        row[index] = 1.0
        row[width + index] = has_evidence
        rows.append((*row, float(query in used), len(query) / 20.0, len(used) / 3.0))
        actions.append(PolicyAction.search(query, f"learned: query ({QUERY_KINDS[index]})"))
    return Decision(SEARCH, tuple(actions), tuple(rows))


@lru_cache(maxsize=65536)
def _item_row(public: _Public, asin: str, title: str, price: str, brand: str, category: str,
              attributes: tuple[str, ...]) -> tuple[float, ...]:
    """The features of one listed product that depend on the task and the listing only (memoised: the same
    listing comes back in every episode of a group). The page-relative cover and the history are added later."""
    request = public.request
    item = PageItem(asin=asin, title=title, price=price, brand=brand, category=category, attributes=list(attributes))
    item_terms, leaf = _item_terms(item), _leaf(item)
    attrs = set(attributes)
    prefs = sum(1 for word in request.preference_words if word in attrs or word in title)
    in_text = sum(1 for attr in attributes if attr and attr in request.text)
    bounds = item.price_bounds()
    in_range = float(public.price_range is not None and bounds is not None
                     and public.price_range[0] <= bounds[0] <= public.price_range[1])
    return (
        _cover(item_terms, request.terms),
        _cover(item_terms, request.evidence_terms - request.terms), float(bool(leaf) and leaf in public.instruction),
        _cover(terms(leaf), request.terms) if leaf else 0.0,
        float(bool(leaf) and any(leaf in query for query in request.evidence)),
        min(prefs, 3) / 3.0, min(in_text, 3) / 3.0,
        float(any(b and (b in brand or b in title) for b in public.brands)),
        float(bool(brand[:2]) and any(brand[:2] in seen for seen in public.browsed)),
        *_budget_features(public, item), in_range,
        min(sum(1 for attr in attributes if attr and any(attr in query for query in request.evidence)), 3) / 3.0,
        _char_cover(attributes, public.instruction),
    )


def _char_cover(attributes: Sequence[str], text: str) -> float:
    """Mean share of each attribute's characters that occur in ``text`` (a paraphrase shares some)."""
    chars = set(text)
    shares = [sum(1 for c in attr if c in chars) / len(attr) for attr in attributes if attr]
    return sum(shares) / len(shares) if shares else 0.0


def _results_decision(public: _Public, page: Page, context: PolicyContext, clicks: list[str]) -> Decision:
    opened = _opened(context.history)
    opened_set, turn = set(opened), len(context.history) / _TURNS
    items = [item for item in page.items if item.asin in clicks]
    static = [_item_row(public, item.asin, item.title, item.price, item.brand, item.category, tuple(item.attributes))
              for item in items]
    best = max((row[0] for row in static), default=0.0)
    width = len(FEATURES[RESULTS])
    rows: list[tuple[float, ...]] = []
    actions: list[PolicyAction] = []
    for item, row in zip(items, static, strict=True):
        cover = row[0]
        rows.append((
            1.0, 0.0, 0.0,
            1.0 / max(item.rank, 1), float(0 < item.rank <= 3), cover, cover - best, float(cover == best),
            *row[1:], float(item.asin in opened_set), float(any(word in item.title for word in ACCESSORY_WORDS)),
            0.0, 0.0, 0.0, 0.0, turn,
        ))
        actions.append(PolicyAction.click(item.asin, f"learned: open {item.asin}"))
    gap = [0.0] * (width - 8)  # the item block, empty on a button's row
    if NEXT in clicks:
        progress = page.page_number / page.total_pages if page.total_pages else 0.0
        rows.append((0.0, 1.0, 0.0, *gap, progress, len(opened) / 4.0, 0.0, 0.0, turn))
        actions.append(PolicyAction.click(NEXT, "learned: next page"))
    if BACK in clicks:
        searches = len(_searches(context.history)) / 3.0
        rows.append((0.0, 0.0, 1.0, *gap, 0.0, 0.0, searches, len(opened) / 4.0, turn))
        actions.append(PolicyAction.click(BACK, "learned: back to search"))
    return Decision(RESULTS, tuple(actions), tuple(rows))


def _parts(value: str) -> list[str]:
    return [part for part in value.replace("+", "＋").split("＋") if part]


def _option_decision(public: _Public, page: Page, axis: str, context: PolicyContext, clicks: list[str]) -> Decision:
    request, product = public.request, page.product
    assert product is not None
    values = [value for value in page.options[axis] if option_label(axis, value) in clicks]
    rows: list[tuple[float, ...]] = []
    actions: list[PolicyAction] = []
    last = max(len(values) - 1, 1)
    for index, value in enumerate(values):
        value_terms = terms(value)
        in_request = float(bool(value) and value in public.instruction)
        parts = _parts(value)
        named = sum(1 for part in parts[1:] if part in public.instruction)
        rows.append((
            1.0, 0.0, in_request, in_request * len(value) / 6.0, _cover(request.terms, value_terms),
            _cover(request.evidence_terms, value_terms) if request.evidence_terms else 0.0,
            float(value in request.size_words),
            float(any(value and (value in word or word in value) for word in request.preference_words)),
            named / max(len(parts) - 1, 1) if len(parts) > 1 else 0.0, (len(parts) - 1 - named) / 3.0,
            float(index == 0), float(index == len(values) - 1), index / last,
            float(axis in public.instruction), len(values) / 6.0,
            float(bool(value) and value.translate(_NUMERALS) in public.numerals),
            float(index == 0 and public.says_low), float(index == len(values) - 1 and public.says_high),
            0.0, 0.0, 0.0,
        ))
        actions.append(PolicyAction.click(option_label(axis, value), f"learned: option {axis}"))
    if PREV in clicks:
        over = _budget_features(public, product)[1]
        rows.append((0.0, 1.0, *([0.0] * 16), over, _cover(_item_terms(product), request.terms),
                     len(_opened(context.history)) / 4.0))
        actions.append(PolicyAction.click(PREV, "learned: back to the results"))
    return Decision(OPTION, tuple(actions), tuple(rows))


def _last_results(history: Sequence[Any]) -> Page | None:
    for turn in reversed(history):
        page = parse_page(turn.observation)
        if page.kind == SEARCH_RESULTS:
            return page
    return None


def _buy_decision(public: _Public, page: Page, context: PolicyContext, clicks: list[str]) -> Decision:
    product = page.product
    assert product is not None
    opened = _opened(context.history)
    turn = len(context.history) / _TURNS
    rows: list[tuple[float, ...]] = []
    actions: list[PolicyAction] = []
    if BUY in clicks:
        has, over, fits, _ = _budget_features(public, product)
        leaf = _leaf(product)
        static = _item_row(public, product.asin, product.title, product.price, product.brand, product.category,
                           tuple(product.attributes))
        rows.append((1.0, 0.0, fits, over, 1.0 - has, static[0], float(bool(leaf) and leaf in public.instruction),
                     float(opened.count(product.asin) > 1), turn, static[6], static[1], static[-1],
                     0.0, 0.0, 0.0))
        actions.append(PolicyAction.click(BUY, "learned: buy"))
    if PREV in clicks:
        results = _last_results(context.history)
        tried = set(opened)
        untried = sum(1 for item in (results.items[:4] if results else []) if item.asin not in tried)
        rows.append((0.0, 1.0, *([0.0] * 10), untried / 4.0, len(opened) / 4.0, turn))
        actions.append(PolicyAction.click(PREV, "learned: back to the results"))
    return Decision(BUY_KIND, tuple(actions), tuple(rows))


def decide(context: PolicyContext) -> Decision | None:
    """The decision this context asks for (None on a page with nothing to decide)."""
    persona_json = json.dumps(context.persona or {}, ensure_ascii=False, sort_keys=True)
    public = _public(context.instruction, persona_json)
    if context.search_offered:
        return _search_decision(public, context)
    clicks = context.click_values()
    page = parse_page(context.observation)
    if page.kind == SEARCH_RESULTS:
        decision = _results_decision(public, page, context, clicks)
    elif page.kind == PRODUCT_DETAIL and page.product is not None:
        pending = [axis for axis in page.options if axis not in page.selected
                   and any(option_label(axis, value) in clicks for value in page.options[axis])]
        decision = (_option_decision(public, page, pending[0], context, clicks) if pending
                    else _buy_decision(public, page, context, clicks))
    else:
        return None
    return decision if decision.actions else None


__all__ = ["BUY_KIND", "FEATURES", "KINDS", "OPTION", "QUERY_KINDS", "RESULTS", "SEARCH", "Decision", "decide"]
