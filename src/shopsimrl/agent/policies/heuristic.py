"""The heuristic baseline: public information only (instruction, persona, pages), no model.

It builds a query from the instruction (budget phrase removed) and the persona's strongest evidence (recent
searches and attribute preferences that share words with the request), ranks the listed products by how
much of the request their title and key attributes cover, opens the best candidates in turn, chooses each
option axis from the words of the instruction and the persona, checks the selected price against the
budget parsed from the visible text, and buys. Stateless: each decision is recomputed from the history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from ...budget import parse_budget_detail as _parse_budget_detail
from ...contract import BACK_TO_SEARCH as BACK
from ...contract import BUY_NOW as BUY
from ...contract import NEXT as NEXT
from ...contract import PREV as PREV
from ...contract import PRODUCT_DETAIL, SEARCH_RESULTS, option_label
from ...errors import PolicyError
from ..page_text import Page, PageItem
from ..page_text import parse_page as _parse_page
from ..policy import PolicyAction, PolicyContext

MAX_CANDIDATES = 4
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_LATIN = re.compile(r"[a-z0-9]+", re.IGNORECASE)
_CLAUSE = re.compile(r"[，,。；;！!？?\s]+")
_FILLER = re.compile(
    r"^(?:请|麻烦|帮我|给我|我想|我要|想要|想买|想入手|最近想入手|打算|准备|需要|找|挑|推荐|来|买|搜|查)+"
)


# Pure functions of immutable strings, called again for every earlier turn (the policy is stateless): memoised.
# The cached values are never mutated by this module.
parse_page = lru_cache(maxsize=4096)(_parse_page)
parse_budget_detail = lru_cache(maxsize=4096)(_parse_budget_detail)


@lru_cache(maxsize=65536)
def terms(text: str) -> frozenset[str]:
    """Han bigrams (unigrams for one-character runs) and Latin/number tokens of ``text``, casefolded."""
    out: set[str] = set()
    for run in _HAN.findall(text):
        if len(run) == 1:
            out.add(run)
        else:
            out.update(run[i : i + 2] for i in range(len(run) - 1))
    out.update(token.casefold() for token in _LATIN.findall(text))
    return frozenset(out)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


class Request:
    """What the visible task and persona say the user wants."""

    def __init__(self, instruction: str, persona: Mapping[str, Any]) -> None:
        self._scores: dict[tuple[str, str, str, tuple[str, ...]], float] = {}
        detail = parse_budget_detail(instruction)
        self.budget = detail.price_upper if detail is not None else None
        text = instruction.replace(detail.evidence, " ") if detail is not None and detail.evidence else instruction
        self.clauses = [clause for clause in (_FILLER.sub("", part) for part in _CLAUSE.split(text)) if clause]
        self.text = " ".join(self.clauses)
        self.terms = terms(self.text)
        interests = persona.get("兴趣偏好") if isinstance(persona, Mapping) else None
        behaviour = persona.get("行为特征") if isinstance(persona, Mapping) else None
        preferences = interests.get("商品属性偏好") if isinstance(interests, Mapping) else None
        prefs = {
            key: _strings(value)
            for key, value in (preferences.items() if isinstance(preferences, Mapping) else ())
            if key != "价格区间"
        }
        self.preference_words = sorted({word for words in prefs.values() for word in words})
        self.size_words = sorted(
            {word for key, words in prefs.items() if "码" in key or "尺" in key for word in words}
        )
        searches = _strings(behaviour.get("最近14天搜索关键词")) if isinstance(behaviour, Mapping) else []
        # A recent search is evidence when it shares at least two terms with the request.
        self.evidence = [query for query in searches if len(terms(query) & self.terms) >= 2]
        self.evidence_terms = set().union(*(terms(query) for query in self.evidence)) if self.evidence else set()

    def query(self) -> str:
        words = [self.text, *self.evidence]
        return " ".join(dict.fromkeys(word for word in words if word)).strip() or "商品"

    def item_score(self, item: PageItem) -> float:
        """How well a listed product covers the request (higher is better); memoised per listed item."""
        key = (item.asin, item.title, item.price, tuple(item.attributes))
        score = self._scores.get(key)
        if score is None:
            score = self._scores[key] = self._item_score(item)
        return score

    def _item_score(self, item: PageItem) -> float:
        haystack = item.title + " " + " ".join(item.attributes)
        item_terms = terms(haystack)
        score = len(item_terms & self.terms) + 0.5 * len((item_terms & self.evidence_terms) - self.terms)
        attrs = set(item.attributes)
        score += 2.0 * sum(1 for word in self.preference_words if word in attrs or word in item.title)
        score += 2.0 * sum(1 for attr in item.attributes if attr and attr in self.text)
        bounds = item.price_bounds()
        if self.budget is not None and bounds is not None and bounds[0] > self.budget:
            score -= 100.0
        return score

    def option_score(self, value: str) -> float:
        if value and value in self.text:
            return 100.0 + len(value)
        if value in self.size_words:
            return 50.0
        if any(value and value in word for word in self.preference_words):
            return 20.0
        return float(len(terms(value) & (self.terms | self.evidence_terms)))


def _visited(history: Sequence[Any]) -> list[tuple[str, Page]]:
    out: list[tuple[str, Page]] = []
    for turn in history:
        page = parse_page(turn.observation)
        if page.kind == PRODUCT_DETAIL and page.product is not None:
            out.append((page.product.asin, page))
    return out


def _last_results(history: Sequence[Any]) -> Page | None:
    for turn in reversed(history):
        page = parse_page(turn.observation)
        if page.kind == SEARCH_RESULTS and page.page_number == 1:
            return page
    return None


def _option_plan(request: Request, page: Page, clicks: Iterable[str]) -> str | None:
    """The next option label to click, or None when every axis has its choice."""
    labels = list(clicks)
    for axis, values in page.options.items():
        if axis in page.selected:
            continue
        offered = [value for value in values if option_label(axis, value) in labels] or values
        if not offered:
            continue
        best = max(offered, key=lambda value: (request.option_score(value), -offered.index(value)))
        return option_label(axis, best)
    return None


def _fits_budget(request: Request, page: Page) -> bool:
    if request.budget is None or page.product is None:
        return True
    bounds = page.product.price_bounds()
    return bounds is None or bounds[1] <= request.budget


@lru_cache(maxsize=1024)
def _request(instruction: str, persona_json: str) -> Request:
    """The parsed request of a task (the same for every turn of its episodes, so it is built once)."""
    return Request(instruction, json.loads(persona_json))


class HeuristicPolicy:
    """A real public-information baseline (see the module docstring)."""

    name = "heuristic"

    def __init__(self, max_candidates: int = MAX_CANDIDATES) -> None:
        self.max_candidates = max_candidates

    def act(self, context: PolicyContext) -> PolicyAction:
        request = _request(context.instruction, json.dumps(context.persona or {}, ensure_ascii=False, sort_keys=True))
        page = parse_page(context.observation)
        clicks = context.click_values()
        if context.search_offered:
            return PolicyAction.search(request.query(), "heuristic: search the request")
        if page.kind == SEARCH_RESULTS:
            return self._on_results(request, page, context, clicks)
        if page.kind == PRODUCT_DETAIL and page.product is not None:
            return self._on_product(request, page, context, clicks)
        if clicks:
            return PolicyAction.click(BACK if BACK in clicks else clicks[0], "heuristic: recover")
        raise PolicyError(f"the heuristic has no action on this page ({page.kind})")

    def _ranked(self, request: Request, page: Page) -> list[PageItem]:
        return sorted(page.items, key=lambda item: (-request.item_score(item), item.rank))

    def _on_results(self, request: Request, page: Page, context: PolicyContext, clicks: list[str]) -> PolicyAction:
        rejected = {asin for asin, _ in _visited(context.history)}
        ranked = self._ranked(request, page)
        for item in ranked[: self.max_candidates]:
            if item.asin not in rejected and item.asin in clicks:
                return PolicyAction.click(item.asin, f"heuristic: open candidate {item.asin}")
        # Every candidate was rejected: buy the best-scoring one anyway rather than nothing.
        if ranked and ranked[0].asin in clicks:
            return PolicyAction.click(ranked[0].asin, "heuristic: fall back to the best candidate")
        return PolicyAction.click(BACK if BACK in clicks else clicks[0], "heuristic: nothing to open")

    def _on_product(self, request: Request, page: Page, context: PolicyContext, clicks: list[str]) -> PolicyAction:
        assert page.product is not None
        visits = [asin for asin, _ in _visited(context.history)]
        opened_before = visits.count(page.product.asin) > 1
        results = _last_results(context.history)
        ranked = self._ranked(request, results)[: self.max_candidates] if results else []
        tried = set(visits)
        untried = [item for item in ranked if item.asin not in tried]
        label = _option_plan(request, page, clicks)
        if label is not None:
            return PolicyAction.click(label, "heuristic: choose an option")
        if BUY in clicks and (_fits_budget(request, page) or opened_before or not untried):
            return PolicyAction.click(BUY, "heuristic: buy")
        if PREV in clicks:
            return PolicyAction.click(PREV, "heuristic: over budget, try the next candidate")
        if BUY in clicks:
            return PolicyAction.click(BUY, "heuristic: buy")
        return PolicyAction.click(clicks[0], "heuristic: recover")
