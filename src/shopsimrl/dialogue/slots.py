"""The shopper's private slots, built at reset from the goal: product noun, attributes, options, budget.

A slot is one requirement the shopper can reveal. Its ``phrase`` is how the noise-free shopper says it (the
words of its own instruction where the instruction paraphrases an attribute); ``surfaces`` are every wording
that would give the slot away, which the leakage tests look for in anything the agent sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..budget import parse_budget_detail
from .vocabulary import leaf_nouns, paraphrases, seller_decorations

PRODUCT, ATTRIBUTE, OPTION, BUDGET = "product", "attribute", "option", "budget"
KINDS = (PRODUCT, ATTRIBUTE, OPTION, BUDGET)
KIND_NAMES = {PRODUCT: "想买什么", ATTRIBUTE: "具体要求", OPTION: "规格", BUDGET: "预算"}
DEFAULT_AXIS = "规格"


@dataclass(frozen=True, slots=True)
class Slot:
    """One requirement: ``kind``, its ``value`` (keyword, option value, noun or budget wording), ``axis``."""

    index: int
    kind: str
    value: str
    phrase: str
    axis: str = ""
    surfaces: tuple[str, ...] = ()
    price_upper: float | None = None

    @property
    def name(self) -> str:
        """A stable identifier for traces (``attribute:防滑``, ``option:颜色分类=白色``, ``budget``)."""
        if self.kind == OPTION:
            return f"{OPTION}:{self.axis}={self.value}"
        if self.kind == BUDGET:
            return BUDGET
        return f"{self.kind}:{self.value}"


def product_noun(goal: Mapping[str, Any]) -> str:
    """How the instruction names the product: the longest leaf noun or synonym in it, else the leaf name."""
    category = str(goal.get("category") or "")
    text = str(goal.get("instruction_text") or "")
    names = leaf_nouns().get(category, ())
    found = [name for name in names if name and name in text]
    if found:
        return max(found, key=lambda name: (len(name), -names.index(name)))
    leaf = category.split("›")[-1].strip()
    return leaf or "东西"


def attribute_phrase(attribute: str, instruction: str) -> str:
    """The shopper's default wording: the keyword if its instruction uses it, else the paraphrase it uses."""
    if attribute in instruction:
        return attribute
    for phrase in paraphrases().get(attribute, ()):
        if phrase in instruction:
            return phrase
    return attribute


_SPOKEN = {"一": "1", "两": "2", "二": "2", "三": "3", "四": "4", "五": "5", "六": "6", "七": "7", "八": "8", "九": "9", "十": "10"}


def plain_option(value: str, instruction: str) -> str:
    """The plain word for a seller-style option value (``黑色【现货速发】`` → ``黑色``), as the request says it.

    The seller's decoration is stripped (the longest known pattern that leaves a value); where the generator
    merged a doubled unit (``2个装`` + ``装`` → ``2个装``), the form that the instruction uses wins. A value
    without a decoration is returned as it is.
    """
    stripped = value
    for prefix, suffix in seller_decorations():
        if len(value) > len(prefix) + len(suffix) and value.startswith(prefix) and value.endswith(suffix):
            stripped = value[len(prefix) : len(value) - len(suffix)].strip()
            if stripped:
                break
    if stripped == value or not stripped:
        return value
    said = "".join(_SPOKEN.get(char, char) for char in instruction)
    for candidate in (stripped + suffix[:1], stripped):
        if candidate in instruction or candidate in said:
            return candidate
    return stripped


def option_axes(product: Mapping[str, Any] | None, values: Sequence[str]) -> dict[str, str]:
    """Option value → its axis on the gold product (``customization_options``); unknown values get 规格."""
    options = product.get("customization_options") if isinstance(product, Mapping) else None
    found: dict[str, str] = {}
    if isinstance(options, Mapping):
        for axis, entries in options.items():
            for entry in entries if isinstance(entries, list) else ():
                value = entry.get("value") if isinstance(entry, Mapping) else entry
                if isinstance(value, str) and value in values and value not in found:
                    found[value] = str(axis)
    return {value: found.get(value, DEFAULT_AXIS) for value in values}


def budget_wording(goal: Mapping[str, Any]) -> tuple[str, float | None]:
    """The budget as the instruction words it (its evidence span), or a wording of the ceiling, or 无所谓."""
    price_upper = goal.get("price_upper")
    price_upper = float(price_upper) if isinstance(price_upper, (int, float)) else None
    detail = parse_budget_detail(str(goal.get("instruction_text") or ""))
    if detail is not None and detail.evidence and detail.price_upper is not None:
        return detail.evidence, price_upper
    if price_upper is not None:
        return f"{format_amount(price_upper)}元以内", price_upper
    return "", None


def format_amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0").rstrip(".")


def build_slots(goal: Mapping[str, Any], product: Mapping[str, Any] | None) -> tuple[Slot, ...]:
    """The slots of a goal in a fixed order: product, attributes, options (goal order), budget."""
    instruction = str(goal.get("instruction_text") or "")
    noun = product_noun(goal)
    slots: list[Slot] = [Slot(0, PRODUCT, noun, noun, surfaces=(noun,))]
    table = paraphrases()
    for attribute in goal.get("attributes") or ():
        attribute = str(attribute)
        surfaces = tuple(dict.fromkeys((attribute, *table.get(attribute, ()))))
        phrase = attribute_phrase(attribute, instruction)
        slots.append(Slot(len(slots), ATTRIBUTE, attribute, phrase, surfaces=surfaces))
    values = [str(value) for value in goal.get("goal_options") or ()]
    for value, axis in option_axes(product, values).items():
        plain = plain_option(value, instruction)
        surfaces = tuple(dict.fromkeys((value, plain)))
        slots.append(Slot(len(slots), OPTION, value, plain, axis=axis, surfaces=surfaces))
    wording, price_upper = budget_wording(goal)
    surfaces = (wording,) if wording else ()
    slots.append(Slot(len(slots), BUDGET, wording, wording, surfaces=surfaces, price_upper=price_upper))
    return tuple(slots)
