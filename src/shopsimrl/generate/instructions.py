"""Full shopping instructions written from the gold product: type, 1–4 attributes, option values, budget.

The text names the product by its noun or a synonym and paraphrases the requirements through several
templates, so it never copies the title. The required attributes are taken from the gold product's own
attribute list (so the gold product scores r_att = 1), the option values are exactly the gold SKU's source
values, and the budget clause always admits the gold SKU price.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from .attribute_kinds import split_by_kind
from .budgets import Budget, make_budget, weighted_choice
from .bundles import DESCRIBED_MARK
from .phrasing import Phrasing, pick_form
from .products import ProductDraft, plain_value
from .rng import pick, pick_many
from .vocabulary import Vocabulary

ATTRIBUTE_COUNT_WEIGHTS = ((0.15, 1), (0.4, 2), (0.35, 3), (0.1, 4))
_EMPTY_CLAUSES = re.compile(r"[，,]\s*(?=[，,。？！]|$)")
_LEADING = re.compile(r"^[，,。\s]+")
_AFTER_STOP = re.compile(r"([？！。])[，,]+")
_COUNTED = re.compile(r"^(\d{1,2})(?=[个只包袋双支瓶盒斤件条片罐桶套张盘格管层人卷])")
OTHER_SYNONYM_SHARE = 0.05
"""Share of short requests that name the product by a synonym its listing need not carry. A synonym the listing
lacks puts the gold below same-leaf listings that happen to carry it (Recall@20 37% for such requests, 74% for the
rest), and at 10% the persona test Recall@20 of the short request was 63.75% against the real 69.07% (train 68.9%),
hence 5%. The full instruction may name any synonym (its other words find the gold)."""
SPOKEN_NUMBER_SHARE = 0.35
"""Share of small counted amounts said in words (``两个装`` for the option ``2个装``), as shoppers write them."""


@dataclass(frozen=True, slots=True)
class Requirements:
    """What a task asks for, before it is put into words."""

    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    budget: Budget
    noun: str
    use: str
    simple_noun: str = ""
    """The name the short request uses (a search-box query names the product as listings do); empty: ``noun``."""


def tidy(text: str) -> str:
    """Drop the separators that empty slots leave behind (``，，`` → ``，``, ``，。`` → ``。``)."""
    text = text.replace("的的", "的").replace("用用", "用").replace("在在", "在")
    text = _EMPTY_CLAUSES.sub("", text)
    text = _AFTER_STOP.sub(lambda match: match.group(1), text)
    text = _LEADING.sub("", text)
    return text.strip()


def describe_attribute(
    attribute: str, vocab: Vocabulary, rng: random.Random, phrasing: Phrasing | None = None
) -> str:
    """The attribute as a shopper writes it: often a paraphrase instead of the listing keyword."""
    table = vocab.paraphrases
    phrases = table["phrases"].get(attribute)
    if phrases and rng.random() < float(table["share"]):
        return pick_form(rng, phrases, phrasing) or attribute
    return attribute


def join_attributes(
    attributes: tuple[str, ...] | list[str], vocab: Vocabulary, rng: random.Random, phrasing: Phrasing | None = None
) -> str:
    """The attributes as a request lists them: properties first (joined by 、/和/又/而且), then uses and audiences
    said as purposes after a 、 (压榨、适合送礼, never 送礼和压榨: ``attribute_kinds``)."""
    forms = [describe_attribute(attribute, vocab, rng, phrasing) for attribute in attributes]
    items, purposes = split_by_kind(attributes, forms, vocab.text)
    joined = _join_properties(items, vocab, rng, bool(purposes))
    return "、".join(part for part in (joined, *purposes) if part)


def _join_properties(items: list[str], vocab: Vocabulary, rng: random.Random, listed: bool) -> str:
    """Properties joined by 、/和/又/而且; three or more before a purpose (``listed``) with 、 only."""
    if len(items) <= 1:
        return "".join(items)
    if len(items) == 2:
        joiner = str(pick(rng, vocab.text["attr_joiners"]))
        return (joiner if not _runs_on(items[0], joiner) else "、").join(items)
    roll = rng.random()  # drawn before a purpose too, so the stream (and every later task) stays as in v8
    if not listed and roll < 0.5 and not _runs_on(items[-2], "和"):
        return "、".join(items[:-1]) + "和" + items[-1]
    return "、".join(items)


def _runs_on(item: str, joiner: str) -> bool:
    """A joiner that would double the item's last character (温和 + 和 → 温和和男女都能用)."""
    return bool(joiner) and item.endswith(joiner[0])


def spoken_amount(value: str, vocab: Vocabulary, rng: random.Random) -> str:
    """``2个装`` → ``两个装`` in a controlled share: the request describes the option instead of copying it."""
    match = _COUNTED.match(value)
    numbers: list[str] = vocab.text["spoken_numbers"]
    if match is None or not 1 <= int(match.group(1)) < len(numbers) or rng.random() >= SPOKEN_NUMBER_SHARE:
        return value
    return numbers[int(match.group(1))] + value[match.end() :]


def option_phrase(axis: str, value: str, vocab: Vocabulary, rng: random.Random, seller: str = "") -> str:
    """The option as a request says it: ``value`` is the plain word (never the seller string ``seller``)."""
    if seller and value != seller and DESCRIBED_MARK in value:
        return value  # a bundle's contents, described (要带充电器和收纳包的那套)
    value = spoken_amount(value, vocab, rng)
    templates = vocab.text["option_templates"]
    phrase = str(pick(rng, templates.get(axis, templates["_default"]))).format(axis=axis, v=value)
    phrase = phrase.replace("码码", "码")
    if seller and seller != value and seller in phrase:
        phrase = f"{axis}要{value}"  # 要{v}装的 would spell the seller string 20公斤装 out
    if phrase[-1].isascii() and phrase[-1].isalnum():
        # The budget parser deletes commas, so "鞋码44，200元" would read as 44200 元.
        phrase += "的"
    return phrase


def choose_requirements(draft: ProductDraft, vocab: Vocabulary, rng: random.Random) -> Requirements:
    """Pick the attributes, option axes and budget of the task this product is gold for."""
    attributes = draft.record["attribute"]
    wanted = weighted_choice(rng, ATTRIBUTE_COUNT_WEIGHTS)
    chosen = tuple(pick_many(rng, attributes, min(wanted, len(attributes))))
    axes = list(draft.gold)
    required: list[str] = []
    if draft.price_axes:
        required.append(draft.price_axes[0])
    for axis in axes:
        if axis in required or len(required) >= 2:
            continue
        if rng.random() < (0.45 if draft.price_axes else 0.6):
            required.append(axis)
    options = tuple((axis, draft.gold[axis]) for axis in axes if axis in required)
    budget = make_budget(rng, vocab.budgets, draft.gold_price, draft.leaf.unit, price_range=draft.leaf.price_range)
    leaf = draft.leaf
    roll = rng.random()
    neutral = leaf.neutral_synonyms()
    synonym = draft.extras.get("synonym", "")
    listed = synonym if synonym in neutral else leaf.noun  # the name the gold listing's title carries
    if roll < 0.5 or not neutral:
        noun = simple_noun = leaf.noun
    elif roll < 0.8 and synonym in neutral:
        noun = simple_noun = synonym
    else:
        noun = pick(rng, neutral)
        simple_noun = noun if roll >= 1.0 - OTHER_SYNONYM_SHARE else listed
    use = draft.extras.get("use") or pick(rng, leaf.uses)
    return Requirements(chosen, options, budget, noun, use, simple_noun)


def full_instruction(draft: ProductDraft, req: Requirements, vocab: Vocabulary, rng: random.Random) -> str:
    template = pick(rng, vocab.text["full_templates"])
    opts = "，".join(
        option_phrase(axis, plain_value(draft, value), vocab, rng, seller=value) for axis, value in req.options
    )
    text = template.format(
        unit=draft.leaf.unit,
        attrs=join_attributes(req.attributes, vocab, rng),
        noun=req.noun,
        opts=opts,
        budget=req.budget.phrase,
        use=req.use,
    )
    return tidy(text)
