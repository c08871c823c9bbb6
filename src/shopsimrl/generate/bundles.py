"""Bundle option axes: values that say what a listing's package contains (``三件套小吃车＋关东煮＋油炸``).

A share of the products of the leaves in ``vocab/text.json``'s ``bundle_options`` get a priced axis (套餐, 配置 …)
whose values are a base plus ＋-joined parts. The values of one axis differ in which parts they hold (nested:
单主机, 两件套主机＋充电器, 三件套主机＋充电器＋收纳包; or overlapping: 主机＋A, 主机＋B, 主机＋A＋B, each with its count), and cost more with more parts.
A request never copies such a value: it describes the contents in words (要带充电器和收纳包的那套), and the value
whose part set is exactly the described parts plus the parts every value shares is the right click
(:func:`described_match`, used by the decidability check and the ``strong`` policy).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..env.fuzzy import token_set_ratio
from .rng import pick, pick_many

FUZZY_LIMIT = 80
"""Two values of one axis stay this dissimilar, so a wrong click never passes the reward's fuzzy match (> 85)."""
BUNDLE_SHARE = 0.5
"""Share of the products of a bundle leaf that list a bundle axis (the leaf's own axis of that name is dropped)."""
JOIN = "＋"
DESCRIBED_MARK = "那套"
"""Every described bundle phrase holds this, so ``option_phrase`` passes it through as it stands."""


@dataclass(frozen=True, slots=True)
class BundleAxis:
    """A drawn bundle axis: its name, the values (fewest parts first) and each value's request phrase."""

    name: str
    values: tuple[str, ...]
    spoken: tuple[str, ...]


_HEAD = re.compile(r"^(?:单|[两三四五]件套)")
_HEADS = ("单", "两件套", "三件套", "四件套", "五件套")
"""A value opens with its count (单主机, 两件套主机＋充电器): without it the reward's token-set match would score a
value whose parts are a subset of another's (主机＋充电器 in 主机＋充电器＋收纳包) as that value (100 > 85)."""


def parts_of(value: str) -> tuple[str, ...]:
    """The parts a bundle value lists, its count head dropped (``两件套主机＋充电器`` → 主机, 充电器)."""
    return tuple(part.strip() for part in _HEAD.sub("", value.strip()).split(JOIN) if part.strip())


def is_bundle_axis(values: Sequence[str]) -> bool:
    """An axis whose values list parts: at least one value holds ``＋`` and every value's parts are distinct."""
    return any(JOIN in v for v in values) and all(_HEAD.match(v) for v in values) and all(len(set(parts_of(v))) == len(parts_of(v)) for v in values)


def _join_words(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else "、".join(words[:-1]) + "和" + words[-1]


def _describe(base: str, extras: Sequence[str], phrases: Mapping[str, list[str]], rng: random.Random) -> str:
    if not extras:
        return str(pick(rng, phrases["base"])).format(base=base)
    templates = phrases["extras"] + (phrases["several"] if len(extras) >= 2 else [])
    return str(pick(rng, templates)).format(base=base, parts=_join_words(extras), plus="加".join(extras))


def draw_bundle(leaf_name: str, text: Mapping[str, Any], rng: random.Random) -> BundleAxis | None:
    """A bundle axis for a product of ``leaf_name``, or None (not a bundle leaf, or not drawn this time).

    Draws nothing from ``rng`` for a leaf without a bundle table, so other leaves' products stay as they were.
    """
    table = text["bundle_options"]["leaves"].get(leaf_name)
    if table is None or rng.random() >= BUNDLE_SHARE:
        return None
    base: str = table["base"]
    count = rng.randint(2, min(3, len(table["parts"])))
    chosen: list[str] = pick_many(rng, table["parts"], count)
    if rng.random() < 0.5:  # nested: base, base＋A, base＋A＋B (, base＋A＋B＋C)
        sets = [chosen[:k] for k in range(0, count + 1)]
        if count == 3 and rng.random() < 0.5:
            sets = sets[1:]
    else:  # overlapping: base＋A, base＋B, base＋A＋B
        sets = [[chosen[0]], [chosen[1]], chosen[:2]]
    values = tuple(_HEADS[len(extras)] + JOIN.join([base, *extras]) for extras in sets)
    if any(token_set_ratio(a, b) > FUZZY_LIMIT for i, a in enumerate(values) for b in values[i + 1 :]):
        return None
    phrases: Mapping[str, list[str]] = text["bundle_options"]["phrases"]
    spoken = tuple(_describe(base, extras, phrases, rng) for extras in sets)
    return BundleAxis(str(pick(rng, table["axes"])), values, spoken)


def described_match(text: str, values: Sequence[str]) -> list[str]:
    """The values whose part set is the parts ``text`` names plus the parts every value shares (longest first, so
    油炸锅 hides 油炸); one value when a description decides the axis, none or several when it does not."""
    sets = {value: frozenset(parts_of(value)) for value in values}
    if not sets:
        return []
    common = frozenset.intersection(*sets.values())
    named: set[str] = set()
    for part in sorted(set().union(*sets.values()), key=len, reverse=True):
        if part in text:
            named.add(part)
            text = text.replace(part, "■")
    wanted = common | named
    return [value for value, parts in sets.items() if parts == wanted]


def bundle_axis_share(records: Iterable[Mapping[str, Any]]) -> float:
    """Option axes that are bundles of ≥2 parts, over every option axis of ``records`` (a realism figure)."""
    axes = bundles = 0
    for record in records:
        for entries in (record.get("customization_options") or {}).values():
            shown = [str(e.get("value")) for e in entries]
            axes += 1
            bundles += is_bundle_axis(shown) and max(len(parts_of(v)) for v in shown) >= 2
    return bundles / max(1, axes)
