"""The rule shopper's wording: a vague opening and colloquial reply templates (fixed text, no randomness)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RequestError
from .slots import ATTRIBUTE, BUDGET, KIND_NAMES, KINDS, OPTION, PRODUCT, Slot

OPENINGS = (
    "你好，我想买个{noun}，你帮我挑一个吧。",
    "帮我找找{noun}吧。",
    "最近想入手{noun}，你帮我看看？",
)
LEADS = ("嗯，", "这个嘛，", "哦，")
NEUTRAL_REPLY = "按照我以往的习惯即可。"
OMITTED = "这个我也没想好，你看着来吧"
NO_BUDGET = "价格没什么要求，合适就行"
ALL_SAID = "我的要求就这些了，没有别的了。"
PURCHASE_OK = "可以，我的要求都说完了，符合的话就买吧。"
PURCHASE_INCOMPLETE = "信息还不完整呢，你还没问我：{missing}。"
AXIS_NAMES = {"颜色分类": "颜色"}


def opening(noun: str, task_id: int) -> str:
    """The first message: only the product noun, nothing else of the goal."""
    return OPENINGS[task_id % len(OPENINGS)].format(noun=noun)


def slot_text(slot: Slot, phrase: str) -> str:
    """One slot said colloquially."""
    if slot.kind == PRODUCT:
        return f"我想买{phrase}"
    if slot.kind == ATTRIBUTE:
        return f"要{phrase}" if phrase.endswith("的") else f"要{phrase}的"
    if slot.kind == OPTION:
        return f"{AXIS_NAMES.get(slot.axis, slot.axis)}要{phrase}"
    if slot.kind == BUDGET:
        return phrase or NO_BUDGET
    raise RequestError(f"unknown slot kind {slot.kind!r}", code="dialogue_unavailable")  # unreachable: the slots come from one enum


def combine(parts: Sequence[str], turn: int) -> str:
    """Up to two answers in one reply, with a lead word that cycles by question number."""
    return LEADS[turn % len(LEADS)] + "；".join(parts) + "。"


def missing_kinds(kinds: Sequence[str]) -> str:
    ordered = [kind for kind in KINDS if kind in set(kinds)]
    return "、".join(KIND_NAMES[kind] for kind in ordered)


def incomplete(kinds: Sequence[str]) -> str:
    return PURCHASE_INCOMPLETE.format(missing=missing_kinds(kinds))
