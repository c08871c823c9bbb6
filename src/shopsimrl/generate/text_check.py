"""Text validator: the broken forms a reader of generated text finds first, rejected at generation.

A review of generated text found them in ~3–4% of searches and preference lists: doubled characters (``家用用``,
``的那套的``), dangling particles (a search ending in ``自己``), whole sentences inside a preference list
(``套餐:["选主机配滤芯的那套"]``), budgets inside recent searches (``最近看吹风枪 价格不超过240元``), repeated
title phrases (``防胀气奶瓶防胀气奶瓶``) and titles that end with another product (``…汽车坐垫搭档 座垫`` on a car
vacuum); a use joined by 和 to a property (``送礼和压榨的食用油``, :func:`odd_join`, also in full requests). :func:`record_problems` names every one found in an archive record; the generator draws again (persona
text) or never writes the form (titles), and ``tests/test_generate_v8.py`` counts 0 over the whole default catalog.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .attribute_kinds import odd_join_pattern

_CJK = "\u4e00-\u9fff"
DOUBLED = re.compile(r"(的的|用用|和和|要要|选选|装装|款款|套套|买买|的那套的|那套那套|了了|是是|在在|给给|也也)")
"""Function words and heads said twice in a row (real reduplications such as 宝宝, 看看 are not listed)."""
_ADJACENT_REPEAT = re.compile(rf"([{_CJK}]{{2,10}}) ?\1")
DANGLING_ENDS = ("、", "，", "自己", "跟")
"""A search may end on 的 (有没有好用又耐用的) or 怎么选; not on a list mark or a bare pronoun (…排行榜 自己)."""
_BUDGET_WORDS = re.compile(
    r"(\d+|[一二两三四五六七八九十百千万]+)\s*(元|块钱|块(?=$|\s|以|左|内|上下)|rmb|RMB|¥)|预算|以内|不超过|价位|价格|售价"
)
_SENTENCE_MARKS = ("的那套", "那套", "选", "要", "，", "。", "想", "吗")
PREFERENCE_MAX_CHARS = 12


def doubled(text: str) -> str | None:
    """The first function word said twice in a row, or None."""
    match = DOUBLED.search(text)
    return match.group() if match else None


def odd_join(text: str) -> str | None:
    """A use or audience joined by 和/又/而且 to a property (``送礼和压榨的食用油``), or None."""
    match = odd_join_pattern().search(text)
    return match.group() if match else None


def repeated_phrase(title: str) -> str | None:
    """A chunk the title says twice in a row (新款新款, 防胀气奶瓶防胀气奶瓶, 财务专用 财务专用) or one of its words
    said twice (适用卧室 … 适用卧室); keyword stuffing of overlapping words (方向盘套 真皮方向盘套) is what shops do."""
    match = _ADJACENT_REPEAT.search(title)
    if match:
        return match.group(1)
    words = [w for w in title.split() if len(w) >= 2]
    return next((w for i, w in enumerate(words) if w in words[:i]), None)


def dangling(text: str) -> str | None:
    """A particle or pronoun the text ends on (``…排行榜 自己``, ``…和``), or None."""
    stripped = text.strip()
    return next((end for end in DANGLING_ENDS if stripped.endswith(end)), None)


def names_budget(text: str) -> bool:
    """A recent search that carries a budget (real searches name products, not ceilings)."""
    return bool(_BUDGET_WORDS.search(text))


def sentence_in_list(item: str) -> bool:
    """A preference-list item that is a sentence (选主机配滤芯的那套), not a value."""
    return len(item) > PREFERENCE_MAX_CHARS or any(mark in item for mark in _SENTENCE_MARKS)


def ends_in_other_product(title: str, own_words: Iterable[str], other_nouns: Iterable[str]) -> str | None:
    """The other product a title ends with (``…汽车坐垫搭档 座垫`` on a car vacuum, ``… 配数据线``), or None: its
    last word is another leaf's noun, or a seller phrase around one (搭配X, 配X, X搭档, X平替, 可替代X, X同款)."""
    tail = title.split()[-1] if title.split() else ""
    if any(w and w in tail for w in own_words):
        return None
    for noun in other_nouns:
        if noun and (tail == noun or any(tail.endswith(form.format(noun)) for form in _PHRASE_FORMS)):
            return noun
    return None


_PHRASE_FORMS = ("配{}", "{}搭档", "{}平替", "可替代{}", "{}同款")


def persona_text_problems(simple: str, persona: Mapping[str, Any]) -> list[str]:
    """Broken forms in a persona task's public text: the short request, the recent searches, the preference lists."""
    problems: list[str] = []
    for form, text in (("request", simple), *(("search", s) for s in _searches(persona))):
        word = doubled(text)
        if word:
            problems.append(f"{form} doubles {word!r}: {text}")
        end = dangling(text) if form == "search" else None
        if end:
            problems.append(f"{form} ends on {end!r}: {text}")
        joined = odd_join(text)
        if joined:
            problems.append(f"{form} joins {joined!r}: {text}")
        if form == "search" and names_budget(text):
            problems.append(f"search names a budget: {text}")
    prefs = persona.get("兴趣偏好", {}).get("商品属性偏好", {})
    for facet, values in prefs.items():
        if facet == "价格区间" or not isinstance(values, list):
            continue
        problems.extend(f"preference {facet} holds a sentence: {v}" for v in values if sentence_in_list(str(v)))
    return problems


def _searches(persona: Mapping[str, Any]) -> list[str]:
    return [str(s) for s in persona.get("行为特征", {}).get("最近14天搜索关键词", [])]


def title_problems(title: str, own_words: Iterable[str], other_nouns: Iterable[str]) -> list[str]:
    """Broken forms in a listing title: a repeated phrase, a doubled word, an ending that names another product."""
    problems: list[str] = []
    chunk = repeated_phrase(title)
    if chunk:
        problems.append(f"title repeats {chunk!r}: {title}")
    word = doubled(title)
    if word:
        problems.append(f"title doubles {word!r}: {title}")
    other = ends_in_other_product(title, own_words, other_nouns)
    if other:
        problems.append(f"title ends with another product {other!r}: {title}")
    return problems


def catalog_text_problems(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every broken form of a generated catalog: titles of every product, persona text of every persona task."""
    from .vocabulary import load_vocabulary

    vocab = load_vocabulary()
    leaves = {leaf.name: leaf for leaf in vocab.leaves}
    nouns = {leaf.name: [leaf.noun, *leaf.synonyms] for leaf in vocab.leaves}
    problems: list[str] = []
    for record in records:
        leaf = leaves.get(str(record["product_category"]))
        if leaf is not None:
            others = [n for name, words in nouns.items() if name != leaf.name for n in words if len(n) >= 2]
            own = [*nouns[leaf.name], *map(str, record.get("attribute", [])), *leaf.uses]
            problems.extend(title_problems(str(record["title"]), own, others))
        joined = odd_join(str(record["instructions"][0]["instruction"])) if record.get("instructions") else None
        if joined:
            problems.append(f"instruction joins {joined!r}: {record['instructions'][0]['instruction']}")
        persona = record.get("user_persona")
        if persona:
            simple = record["instructions"][0].get("instruction_simple") or ""
            problems.extend(persona_text_problems(simple, persona))
    return problems
