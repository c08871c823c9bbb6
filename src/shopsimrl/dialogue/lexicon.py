"""Which slots a question asks about: fixed keyword tables, substring tests only (linear in the question).

The lexicon knows question words, never goal content: the goal's own words (attribute keywords and their
paraphrases, option values) are matched against the question through the slots' ``surfaces``. Every test is
``word in text`` over a bounded question (``MAX_QUESTION_CHARS``) and a fixed table, so matching costs time
linear in the question and cannot backtrack.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from .slots import ATTRIBUTE, BUDGET, OPTION, PRODUCT, Slot
from .vocabulary import attribute_initials, attribute_words, longest_attribute_word

PURCHASE, SLOTS, OPEN, NEUTRAL = "purchase", "slots", "open", "neutral"

PURCHASE_WORDS = (
    "下单", "可以买", "能买", "就买", "买这个", "买这款", "买它", "就这个", "就这款", "拍下", "确认购买", "结账",
    "付款", "帮您买", "帮你买", "买下", "buy now", "要这个吗", "要这款吗", "这款可以吗", "这个可以吗", "这款怎么样",
    "这个怎么样", "推荐这款", "推荐这个", "选这款", "选这个",
)  # fmt: skip
BUDGET_WORDS = (
    "预算", "价格", "价位", "价钱", "多少钱", "钱", "贵", "便宜", "花费", "花多少", "多少元", "多少块", "budget", "price",
)  # fmt: skip
PRODUCT_WORDS = ("买什么", "什么商品", "什么东西", "哪类", "什么产品", "想要什么", "找什么")
ATTRIBUTE_WORDS = (
    "要求", "功能", "特点", "特性", "属性", "需求", "看重", "在意", "注重", "什么样", "偏好", "性能", "材质",
    "讲究", "条件",
)  # fmt: skip
OPEN_WORDS = ("还有", "其他", "其它", "别的", "另外", "还需要", "补充", "所有", "全部", "完整", "遗漏")
OPTION_WORDS = ("规格", "款式", "选项", "哪一款", "哪款", "版本", "哪种", "sku")
AXIS_WORDS: dict[str, tuple[str, ...]] = {
    "颜色分类": ("颜色", "色"),
    "尺码": ("尺码", "尺寸", "码数", "大小", "多大", "几号", "多少号", "什么码"),
    "鞋码": ("鞋码", "尺码", "码数", "多大", "几号", "多少号", "什么码", "几码"),
    "规格": ("规格",),
    "容量": ("容量", "多大"),
    "型号": ("型号", "适配", "机型"),
    "套餐类型": ("套餐",),
    "款式": ("款式",),
    "口味": ("口味", "味道"),
    "重量": ("重量", "分量", "多重"),
    "适用人数": ("人数", "几个人", "几人", "多少人"),
    "电源功率": ("功率",),
    "参考身高": ("身高", "多高"),
    "适用床尺寸": ("床", "尺寸"),
    "轴体名称": ("轴",),
}


@dataclass(frozen=True, slots=True)
class Match:
    """The question's intent and, for ``slots``, the slot indices it names (``slots``) or asks about in
    general words (``general``), each in slot order."""

    intent: str
    slots: tuple[int, ...] = ()
    general: tuple[int, ...] = ()


def normalize(question: str) -> str:
    """NFKC + casefold: full-width letters and digits match their ASCII table entries."""
    return unicodedata.normalize("NFKC", question).casefold()


def _any(words: Sequence[str], text: str) -> bool:
    return any(word in text for word in words)


def axis_words(axis: str) -> tuple[str, ...]:
    return (axis, *AXIS_WORDS.get(axis, ()))


def _foreign_axis(text: str, slots: Sequence[Slot]) -> bool:
    """Whether the question names an option axis that none of the goal's options has (``颜色`` for a ball)."""
    own = {slot.axis for slot in slots if slot.kind == OPTION}
    own_words = {word for axis in own for word in axis_words(axis)}
    return any(
        word in text and word not in own_words and word not in OPTION_WORDS
        for axis in AXIS_WORDS
        if axis not in own
        for word in axis_words(axis)
        if len(word) > 1
    )


def _foreign_attribute(text: str, slots: Sequence[Slot]) -> bool:
    """Whether the question names a vocabulary attribute that is none of the goal's (nor inside one of them).

    Scans every substring of at most the longest vocabulary word: O(len(text) × that length) set lookups.
    """
    words = attribute_words()
    initials = attribute_initials()
    longest = longest_attribute_word()
    own = [surface.casefold() for slot in slots if slot.kind in (ATTRIBUTE, PRODUCT) for surface in slot.surfaces]
    for start, char in enumerate(text):
        if char not in initials:
            continue
        for end in range(start + 2, min(len(text), start + longest) + 1):
            word = text[start:end]
            if word in words and not any(word in surface for surface in own):
                return True
    return False


def match_question(question: str, slots: Sequence[Slot]) -> Match:
    """Classify one question: a purchase proposal, specific slots, an open question, or nothing known.

    Specific words (the budget, a goal axis or option value, an attribute keyword or paraphrase) always
    count; general words (``要求``, ``规格``) add the attribute or option slots unless the question names an
    axis the goal has no option for or an attribute the goal does not ask for, which gets the neutral answer.
    """
    text = normalize(question)
    if _any(PURCHASE_WORDS, text):
        return Match(PURCHASE)
    general = not _foreign_axis(text, slots) and not _foreign_attribute(text, slots)
    general_options = general and _any(OPTION_WORDS, text)
    general_attributes = general and _any(ATTRIBUTE_WORDS, text)
    specific: list[int] = []
    broad: list[int] = []
    for slot in slots:
        if slot.kind == PRODUCT:
            named, loose = _any(PRODUCT_WORDS, text), False
        elif slot.kind == BUDGET:
            named, loose = _any(BUDGET_WORDS, text), False
        elif slot.kind == OPTION:
            named = slot.value.casefold() in text or _any(axis_words(slot.axis), text)
            loose = general_options
        else:
            named = _any([surface.casefold() for surface in slot.surfaces], text)
            loose = general_attributes
        if named:
            specific.append(slot.index)
        elif loose:
            broad.append(slot.index)
    if specific or broad:
        return Match(SLOTS, tuple(specific), tuple(broad))
    if general and _any(OPEN_WORDS, text):
        return Match(OPEN)
    return Match(NEUTRAL)


__all__ = ["ATTRIBUTE", "BUDGET", "OPTION", "PRODUCT", "Match", "match_question", "normalize"]
