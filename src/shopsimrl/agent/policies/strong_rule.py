"""The strong rule policy: the heuristic plus full knowledge of the generator's vocabulary.

It knows every leaf attribute, the paraphrase table (so 用得久 reads as 耐用), every option value, the budget
parser and the persona's preferences and brands; since v5 also the spoken counts (两个装 = 2个装) and the end-value
descriptions (规格要大一点的那个 = the last value), and since v5.1 the implied-cue table too (a recent search
晚上用不吵人的风扇 reads as 静音; a cue that the table lists under several attributes reads as all of them, since a rule
cannot tell which one the shopper meant); since v6 also the confuser phrases (a listing whose title opens with
适用蓝牙耳机, 卷尺平替 or 搭配羽绒服 is an accessory or companion of another type, ranked last). It ranks candidates
by the recovered attributes, prefers
the persona's brands, and passes over a product that lacks a requested option value or exceeds the budget.
It is the upper bound a rule-writer with the generator's source reaches; the catalog must keep it ≤ 55%.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ...contract import BACK_TO_SEARCH as BACK
from ...contract import BUY_NOW as BUY
from ...contract import PREV, PRODUCT_DETAIL, SEARCH_RESULTS, option_label
from ...generate.bundles import described_match, is_bundle_axis
from ...generate.confusers import confuser_table
from ...generate.vocabulary import load_vocabulary
from ..page_text import Page, PageItem
from ..policy import PolicyAction, PolicyContext
from .heuristic import HeuristicPolicy, Request, _option_plan, _strings, _visited, parse_page

MAX_CANDIDATES = 6
_SPOKEN = {"两": "2", "二": "2", "三": "3", "四": "4", "五": "5", "六": "6", "七": "7", "八": "8", "九": "9", "十": "10"}
_SPOKEN_COUNT = re.compile(r"([两二三四五六七八九十])(?=[个只包袋双支瓶盒斤件条片罐桶套张盘格管层人卷])")
_LOW = re.compile(r"最小|最便宜|最低|小一点|便宜点|选小的|选便宜的")
_HIGH = re.compile(r"最大|最高|大一点|选大的|最贵|贵一点|选贵的")


@lru_cache(maxsize=1)
def _knowledge() -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """(paraphrase → attribute, every attribute, every option value), longest first."""
    vocab = load_vocabulary()
    back = {phrase: attribute for attribute, phrases in vocab.paraphrases["phrases"].items() for phrase in phrases}
    attributes = sorted({a for leaf in vocab.leaves for a in leaf.all_attributes()}, key=len, reverse=True)
    values = sorted({v for leaf in vocab.leaves for axis in leaf.axes for v in axis.values}, key=len, reverse=True)
    return back, tuple(attributes), tuple(values)


ACCESSORY_PENALTY = 40.0
"""v6: score taken off a listing that advertises fitting another product (a cross-leaf confuser)."""


@lru_cache(maxsize=1)
def _accessory_pattern() -> re.Pattern[str]:
    """A title's first word that is a confuser phrase of ``vocab/confusers.json`` around a vocabulary noun."""
    vocab = load_vocabulary()
    nouns = sorted({n for leaf in vocab.leaves for n in (leaf.noun, *leaf.synonyms)}, key=len, reverse=True)
    noun = "\\S*?(?:" + "|".join(re.escape(n) for n in nouns) + ")"
    templates = [t for kind in confuser_table()["title"].values() for t in kind]
    return re.compile("^(?:" + "|".join(re.escape(t).replace(re.escape("{noun}"), noun) for t in templates) + ")(?:\\s|$)")


def is_accessory_listing(title: str) -> bool:
    """Whether ``title`` opens with a confuser phrase (适用X, X专用, 搭配X, X平替 …), as a v6 confuser does."""
    return _accessory_pattern().match(title) is not None


@lru_cache(maxsize=1)
def _cues() -> tuple[tuple[tuple[str, ...], str], ...]:
    """The implied-cue table as (fixed fragments around ``{noun}``, attribute): a search holding every fragment."""
    table: dict[str, Any] = load_vocabulary().personas["implied_cues"]
    out: list[tuple[tuple[str, ...], str]] = []
    for attribute, cues in table.items():
        if attribute.startswith("_") or not isinstance(cues, list):
            continue
        for cue in cues:
            fragments = tuple(part.strip() for part in str(cue).split("{noun}") if part.strip())
            if fragments:
                out.append((fragments, attribute))
    return tuple(out)


def implied_attributes(searches: list[str]) -> set[str]:
    """Every attribute whose implied cue one of the persona's recent searches spells out."""
    return {
        attribute
        for fragments, attribute in _cues()
        for search in searches
        if all(fragment in search for fragment in fragments)
    }


class StrongRequest(Request):
    """The heuristic's request, with paraphrases mapped back to attributes and the vocabulary's words found."""

    avoid_accessories = True
    """v6: rank confuser listings last (False: the v5.1 policy, for the benchmark's comparison)."""

    def __init__(self, instruction: str, persona: Mapping[str, Any]) -> None:
        back, attributes, values = _knowledge()
        # v5 vocabulary: small counts said in words (两个装 → 2个装), end values described (要最大的那档)
        instruction = _SPOKEN_COUNT.sub(lambda match: _SPOKEN[match.group(1)], instruction)
        self.extremes = {
            clause: "high" if _HIGH.search(clause) else "low"
            for clause in re.split(r"[，,。；;！!？?\s]+", instruction)
            if _HIGH.search(clause) or _LOW.search(clause)
        }
        recovered = [attribute for phrase, attribute in back.items() if phrase in instruction]
        expanded = instruction + ("，" + "，".join(recovered) if recovered else "")
        super().__init__(expanded, persona)
        said = " ".join(self.evidence)
        implied = {attribute for phrase, attribute in back.items() if phrase in said}
        behaviour = persona.get("行为特征") if isinstance(persona, Mapping) else None
        searches = _strings(behaviour.get("最近14天搜索关键词")) if isinstance(behaviour, Mapping) else []
        implied |= implied_attributes(searches)
        self.required = [a for a in attributes if a in self.text or a in implied]
        self.option_words = [v for v in values if v in self.text]
        interests = persona.get("兴趣偏好") if isinstance(persona, Mapping) else None
        self.brands = _strings(interests.get("品牌偏好")) if isinstance(interests, Mapping) else []

    def _item_score(self, item: PageItem) -> float:
        score = super()._item_score(item)
        haystack = item.title + " " + " ".join(item.attributes)
        score += 3.0 * sum(1 for attribute in self.required if attribute in haystack)
        if any(brand and (brand in item.brand or brand in item.title) for brand in self.brands):
            score += 2.5
        if self.avoid_accessories and is_accessory_listing(item.title):
            score -= ACCESSORY_PENALTY
        return score

    def lacks_option(self, page: Page) -> bool:
        """A requested option value that no axis of this product offers (as text)."""
        offered = " ".join(value for values in page.options.values() for value in values)
        return any(word not in offered for word in self.option_words) if page.options else bool(self.option_words)


@lru_cache(maxsize=1024)
def _request(instruction: str, persona_json: str) -> StrongRequest:
    return StrongRequest(instruction, json.loads(persona_json))


def _extreme_option(request: StrongRequest, page: Page, clicks: list[str]) -> str | None:
    """An unselected axis that the request describes by its end (要最大的那档): its last or first value."""
    for axis, values in page.options.items():
        if axis in page.selected or not values:
            continue
        ends = [end for clause, end in request.extremes.items() if axis in clause or "那个" in clause]
        if ends:
            label = f"{axis}={values[-1] if ends[0] == 'high' else values[0]}"
            if label in clicks:
                return label
    return None


def _bundle_option(request: StrongRequest, page: Page, clicks: list[str]) -> str | None:
    """v7.1: an unselected bundle axis (两件套主机＋充电器 …) whose one value holds exactly the parts the request or
    the persona describes (要带充电器的那套), plus the parts every value shares."""
    said = " ".join([request.text, *request.evidence, *request.preference_words])
    for axis, values in page.options.items():
        if axis in page.selected or not is_bundle_axis(values):
            continue
        matched = described_match(said, values)
        if len(matched) == 1 and (label := option_label(axis, matched[0])) in clicks:
            return label
    return None


class StrongRulePolicy(HeuristicPolicy):
    """The heuristic's loop with :class:`StrongRequest` and stricter product checks."""

    name = "strong"

    def __init__(self) -> None:
        super().__init__(MAX_CANDIDATES)

    def act(self, context: PolicyContext) -> PolicyAction:
        request = _request(context.instruction, json.dumps(context.persona or {}, ensure_ascii=False, sort_keys=True))
        page = parse_page(context.observation)
        clicks = context.click_values()
        if context.search_offered:
            return PolicyAction.search(request.query(), "strong: search the request")
        if page.kind == SEARCH_RESULTS:
            return self._on_results(request, page, context, clicks)
        if page.kind == PRODUCT_DETAIL and page.product is not None:
            return self._on_product_strict(request, page, context, clicks)
        return PolicyAction.click(BACK if BACK in clicks else clicks[0], "strong: recover")

    def _on_product_strict(
        self, request: StrongRequest, page: Page, context: PolicyContext, clicks: list[str]
    ) -> PolicyAction:
        assert page.product is not None
        visits = [asin for asin, _ in _visited(context.history)]
        results = next(
            (p for t in reversed(context.history) if (p := parse_page(t.observation)).kind == SEARCH_RESULTS), None
        )
        ranked = self._ranked(request, results)[: self.max_candidates] if results else []
        untried = [item for item in ranked if item.asin not in set(visits)]
        bounds = page.product.price_bounds()
        too_dear = request.budget is not None and bounds is not None and bounds[0] > request.budget
        retry = untried and visits.count(page.product.asin) <= 1 and (too_dear or request.lacks_option(page))
        if retry and PREV in clicks:
            return PolicyAction.click(PREV, "strong: lacks a requested value or over budget")
        label = (
            _extreme_option(request, page, clicks)
            or _bundle_option(request, page, clicks)
            or _option_plan(request, page, clicks)
        )
        if label is not None:
            return PolicyAction.click(label, "strong: choose an option")
        if BUY in clicks:
            return PolicyAction.click(BUY, "strong: buy")
        return PolicyAction.click(clicks[0], "strong: recover")
