"""Cross-leaf confusers: neighbouring-leaf listings that a search for another leaf's product brings up.

On Taobao a search for 蓝牙耳机 also lists 数据线 "适用蓝牙耳机", a search for 被子 lists 被子收纳箱, and one for
测距仪 lists 卷尺 sold as its 平替. ``vocab/confusers.json`` names such pairs (same domain, another
sub-category, so the category paths share one level only). For a share of a target leaf's tasks, one product
of a partner leaf becomes that task's confuser: its title gains a short seller phrase (``适用蓝牙耳机``), its
bullets a compatibility line naming the target noun, synonyms, uses and requested attributes (search indexes
bullets, so it ranks for the target's queries), and its attribute list the requested attributes its own leaf
also has (never an exclusive sibling of one it has, never one that conflicts with its options).

Why r_type < 1 holds: the title overlap with the target's gold title is checked with the reward's own
``title_terms``/``type_reward`` at generation time, and a confuser that would score r_type = 1 for its target
is not made. Why no task breaks: a confuser keeps its own noun, required attributes and options, so its own task
keeps its gold SKU; it is repriced around the target's budget (``reprice``) and rewrites its own budget to match;
targets are never modified, and no product is both a target and a confuser.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from ..env import title_terms, type_reward
from .instructions import Requirements
from .products import ProductDraft, no_repeats, plain_value
from .reprice import reprice_confusers
from .rng import pick, pick_many
from .vocabulary import Leaf, Vocabulary, read_vocab_file

CONFUSER_SHARE = 0.3
"""Share of a paired target leaf's tasks that get one confuser from a partner leaf."""
MAX_ATTRIBUTES = 5
TITLE_SYNONYMS = 1
"""Synonyms of the target noun a confuser's title stuffs (more rank it above the gold for more requests)."""
SOURCE_TRIES = 4
"""Partner products tried per target before giving up (a product whose own title shares too many words fails)."""
FIT_ATTRIBUTES = 2
PHRASE_AT_END_SHARE = 0.4
"""Share of confusers whose seller phrase is not the title's first word: it comes after the first word, never at
the end, since a title ending with another product reads as that product."""
BARE_SHARE = 0.15
"""Share of confusers with no seller phrase in the title at all (only the compatibility bullet)."""
GENUINE_PHRASE_SHARE = 0.15
"""Share of a paired leaf's other listings that carry a seller phrase of their own (适用夜市摆摊, 家用专用), so
a phrase is no perfect marker of a confuser."""
"""At most this many requested attributes are named in the compatibility line and added to the attributes."""


class _Store(Protocol):
    def get(self, position: int) -> tuple[ProductDraft, Requirements, str]: ...

    def put(self, position: int, item: tuple[ProductDraft, Requirements, str]) -> None: ...


@dataclass(frozen=True, slots=True)
class Confuser:
    position: int
    """Archive position of the confuser product (its own task is unchanged)."""
    target: int
    """Archive position of the task it confuses."""
    r_type: float
    """The reward's r_type when the confuser is bought for the target's task (always < 1)."""


def with_phrase(title: str, phrase: str, inside: bool) -> str:
    """``title`` with a seller phrase first, or (``inside``) after its first word, never at the end, where a
    title would end with another product (``…汽车坐垫搭档 座垫`` on a car vacuum); said once (``no_repeats``)."""
    title = no_repeats(" ".join(title.split()))
    if not phrase:
        return title
    head, _, rest = title.partition(" ")
    text = f"{head} {phrase} {rest}" if inside and rest else f"{phrase} {title}"
    return no_repeats(" ".join(text.split()))


@lru_cache(maxsize=1)
def confuser_table() -> dict[str, Any]:
    return read_vocab_file("confusers.json")


def partner_pairs(leaves: list[Leaf]) -> list[tuple[int, list[tuple[int, str]]]]:
    """(target leaf index, [(source leaf index, kind)]) for the table's pairs whose leaves are both present."""
    index = {leaf.name: i for i, leaf in enumerate(leaves)}
    pairs: list[tuple[int, list[tuple[int, str]]]] = []
    for target, spec in confuser_table()["pairs"].items():
        if target not in index:
            continue
        sources = []
        for token in spec.split():
            name, _, kind = token.partition(":")
            if name in index:
                sources.append((index[name], kind))
        if sources:
            pairs.append((index[target], sources))
    return sorted(pairs)


def r_type_for(confuser: dict[str, Any], gold: dict[str, Any]) -> float:
    """The reward's r_type when ``confuser`` is bought for the task whose gold product is ``gold``."""
    return type_reward(
        confuser["category"], gold["category"], title_terms(confuser["title"]), title_terms(gold["title"])
    )[0]


def _added_attributes(source: ProductDraft, own: Requirements, wanted: tuple[str, ...], vocab: Vocabulary) -> list[str]:
    """Requested attributes that the source leaf also lists and that fit the source product."""
    leaf = source.leaf
    current = list(source.record["attribute"])
    conflicts: dict[str, list[str]] = vocab.text["option_conflicts"]
    offered = {
        plain_value(source, entry["value"])
        for entries in source.record["customization_options"].values()
        for entry in entries
    }
    added: list[str] = []
    for attribute in wanted:
        if attribute not in leaf.facets or attribute in current:
            continue
        slot = next((s for s in leaf.slots if attribute in s.values), None)
        if slot is not None and any(value in slot.values for value in current + added):
            continue
        if set(conflicts.get(attribute, ())) & offered:
            continue
        added.append(attribute)
    return added[:FIT_ATTRIBUTES]


def _fit_line(kind: str, target: ProductDraft, wanted: tuple[str, ...], rng: random.Random) -> str:
    leaf = target.leaf
    templates: list[str] = confuser_table()["fit"][kind]
    attrs = "".join(wanted[:FIT_ATTRIBUTES])
    usable = templates if attrs else [t for t in templates if "{attrs}" not in t]
    names = "、".join([leaf.noun, *pick_many(rng, leaf.synonyms, min(2, len(leaf.synonyms)))])
    scenes = leaf.uses_for([*wanted, *target.record["attribute"]])
    uses = "、".join(pick_many(rng, scenes, min(2, len(scenes))))
    return pick(rng, usable).format(names=names, uses=uses, attrs=attrs, noun=leaf.noun)


def _paraphrase_line(target: ProductDraft, wanted: tuple[str, ...], vocab: Vocabulary, rng: random.Random) -> list[str]:
    """A seller line in the shopper's words (声音小 for 静音), which is how short requests name attributes."""
    table: dict[str, list[str]] = vocab.paraphrases["phrases"]
    spoken = [pick(rng, table[a]) for a in wanted[:FIT_ATTRIBUTES] if table.get(a)]
    if not spoken:
        return []
    return [f"{'、'.join(spoken)}的{target.leaf.noun}都能配"]


def _make(
    source: ProductDraft, own: Requirements, target: ProductDraft, wanted: tuple[str, ...], kind: str,
    vocab: Vocabulary, rng: random.Random,
) -> float | None:
    """Turn ``source`` into ``target``'s confuser in place; None (and untouched) if r_type would reach 1."""
    record = source.record
    template = pick(rng, confuser_table()["title"][kind])
    noun = target.leaf.noun
    fit = _fit_line(kind, target, wanted, rng)
    added = _added_attributes(source, own, wanted, vocab)
    named = [a for a in wanted if a not in noun][:FIT_ATTRIBUTES]
    others = [s for s in target.leaf.synonyms if s != noun]
    synonyms = "/".join(pick_many(rng, others, min(TITLE_SYNONYMS, len(others))))
    # Richest first (the requested attributes, the noun, its synonyms as sellers stuff them), down to the bare
    # noun; repeating words of the gold title costs nothing, since the reward compares sets of terms.
    phrases: list[str] = []
    for k in range(len(named), -1, -1):
        head = template.format(noun="".join(named[:k]) + noun)
        phrases += [f"{head} {synonyms}", head] if synonyms else [head]
    phrases.sort(key=lambda p: -len(p))
    if rng.random() < BARE_SHARE:
        phrases.insert(0, "")
    at_end = rng.random() < PHRASE_AT_END_SHARE
    for phrase in dict.fromkeys(phrases):
        title = with_phrase(record["title"], phrase, at_end)
        r_type = r_type_for(dict(record, title=title), target.record)
        if r_type < 1.0:
            break
    else:
        return None
    required = set(own.attributes)
    current: list[str] = list(record["attribute"])
    added = added[: max(0, MAX_ATTRIBUTES - sum(1 for a in current if a in required))]
    room = MAX_ATTRIBUTES - len(added)
    kept = [a for a in current if a in required]
    kept += [a for a in current if a not in required][: max(0, room - len(kept))]
    attributes = [a for a in current if a in kept] + added
    record["title"] = title
    record["full_description"] = title
    record["attribute"] = attributes
    record["small_description"] = [fit, *_paraphrase_line(target, wanted, vocab, rng), *record["small_description"]]
    source.extras["confuser_of"] = target.record["asin"]
    return r_type


def add_confusers(
    leaves: list[Leaf],
    by_leaf: dict[int, list[int]],
    store: _Store,
    vocab: Vocabulary,
    rng: random.Random,
    persona: frozenset[int] | set[int] = frozenset(),
    share: float = CONFUSER_SHARE,
) -> list[Confuser]:
    """Make confusers for ``share`` of every paired target leaf's tasks; returns them in a stable order.

    Targets are drawn first (``persona`` positions first: those are the tasks that are evaluated), then for each
    one a partner product that is no target is rewritten and put back into ``store`` (two-axis products, which
    cleaning drops, are neither targets nor confusers). The partner leaf's supply bounds the count.
    """
    first: list[tuple[int, int, str]] = []
    rest: list[tuple[int, int, str]] = []
    for target_leaf, sources in partner_pairs(leaves):
        positions = by_leaf.get(target_leaf, [])
        evaluated = [p for p in positions if p in persona]  # the evaluated (persona) tasks first
        others = [p for p in positions if p not in persona]
        ordered = pick_many(rng, evaluated, len(evaluated)) + pick_many(rng, others, len(others))
        for target in ordered[: round(share * len(positions))]:
            source_leaf, kind = pick(rng, sources)
            (first if target in persona else rest).append((target, source_leaf, kind))
    plan = first + rest  # partner leaves serve several targets: persona tasks of every leaf before the rest
    targets = {target for target, _, _ in plan}
    pools: dict[int, list[int]] = {}
    confusers: list[Confuser] = []
    for target, source_leaf, kind in plan:
        target_draft, target_req, _ = store.get(target)
        if target_draft.two_axis:
            continue
        if source_leaf not in pools:
            own = [p for p in by_leaf.get(source_leaf, []) if p not in targets]
            pools[source_leaf] = pick_many(rng, own, len(own))
        pool = pools[source_leaf]
        # a product that fails for this target (its own title shares too many words) may suit the next one
        for index in range(len(pool) - 1, max(-1, len(pool) - 1 - SOURCE_TRIES), -1):
            source = pool[index]
            draft, own_req, text = store.get(source)
            if draft.two_axis:
                del pool[index]
                continue
            r_type = _make(draft, own_req, target_draft, target_req.attributes, kind, vocab, rng)
            if r_type is not None:
                del pool[index]
                store.put(source, (draft, own_req, text))
                confusers.append(Confuser(source, target, r_type))
                break
    _genuine_phrases(leaves, by_leaf, store, {c.position for c in confusers} | targets, rng)
    # priced around the target's budget, from a stream of its own so that the draws above are not shifted
    reprice_confusers([(c.position, c.target) for c in confusers], store, vocab, random.Random(rng.random()))
    return confusers


def _genuine_phrases(
    leaves: list[Leaf], by_leaf: dict[int, list[int]], store: _Store, skip: set[int], rng: random.Random
) -> None:
    """Some genuine listings of every paired leaf carry a seller phrase: a use (适用夜市摆摊, 家用专用) or what
    comes with them (配数据线, 搭配收纳袋: a partner leaf's noun), at the start or the end of the title.

    Confusers and their targets are skipped: a target's title is its goal's name, which the confuser's r_type
    was checked against."""
    table = confuser_table()["title"]
    for target_leaf, sources in partner_pairs(leaves):
        leaf = leaves[target_leaf]
        for position in by_leaf.get(target_leaf, []):
            if position in skip or rng.random() >= GENUINE_PHRASE_SHARE:
                continue
            draft, req, text = store.get(position)
            if rng.random() < 0.5:
                phrase = pick(rng, table["acc"]).format(noun=pick(rng, leaf.uses_for(draft.record["attribute"])))
            else:
                partner = leaves[pick(rng, sources)[0]]
                phrase = pick(rng, table["mate"]).format(noun=partner.noun)
            title = with_phrase(draft.record["title"], phrase, rng.random() < PHRASE_AT_END_SHARE)
            draft.record["title"] = draft.record["full_description"] = title
            store.put(position, (draft, req, text))
