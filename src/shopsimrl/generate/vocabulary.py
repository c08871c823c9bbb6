"""The generator's vocabulary, read from the JSON data files in ``vocab/`` (no catalog wording lives in code).

``catalog.json`` holds domains → sub-categories → leaves in a compact notation (space-separated lists,
``facet:a/b/c`` exclusive attribute groups, ``axis$=v1 v2`` option axes, ``@pool`` references into
``pools.json``); this module expands it once into frozen dataclasses so generation never re-parses text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import DataError

DEFAULT_FACET = "功能"


@dataclass(frozen=True, slots=True)
class AttributeSlot:
    """One attribute choice: a single attribute, or an exclusive group of which a product takes one."""

    facet: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Axis:
    """An option axis of a leaf; ``ordered`` axes get prices that rise along the value order."""

    name: str
    values: tuple[str, ...]
    ordered: bool


@dataclass(frozen=True, slots=True)
class Leaf:
    domain: str
    sub: str
    name: str
    noun: str
    synonyms: tuple[str, ...]
    unit: str
    price_range: tuple[float, float]
    slots: tuple[AttributeSlot, ...]
    axes: tuple[Axis, ...]
    uses: tuple[str, ...]
    has_model_code: bool
    words: tuple[str, ...]
    tags: tuple[str, ...]
    facets: dict[str, str]
    """attribute → facet, precomputed (looked up for every bullet and persona preference)."""
    neutral: tuple[str, ...]
    """Synonyms that claim no leaf attribute at all."""
    foreign: tuple[str, ...] = ()
    """Words of another kind of its domain (猫 on a dog leaf: catalog.json ``kinds``); no text of the leaf's
    products may hold one."""

    @property
    def category(self) -> str:
        return f"{self.domain}›{self.sub}›{self.name}"

    def all_attributes(self) -> tuple[str, ...]:
        return tuple(self.facets)

    def neutral_synonyms(self, attributes: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
        """Synonyms that claim no leaf attribute outside ``attributes`` ("无线鼠标" is no name for a wired mouse)."""
        if not attributes:
            return self.neutral
        others = [a for a in self.facets if a not in attributes]
        return tuple(s for s in self.synonyms if not any(a in s for a in others))

    def facet_of(self, attribute: str) -> str:
        return self.facets.get(attribute, DEFAULT_FACET)

    def uses_for(self, attributes: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """Use scenes that name no exclusive sibling of ``attributes`` (幼犬期 is no scene for 成犬 food)."""
        siblings = [v for slot in self.slots if set(slot.values) & set(attributes) for v in slot.values
                    if v not in attributes]
        return tuple(u for u in self.uses if not any(v in u for v in siblings)) or self.uses


@dataclass(frozen=True, slots=True)
class Vocabulary:
    leaves: tuple[Leaf, ...]
    domains: tuple[str, ...]
    text: dict[str, Any]
    budgets: dict[str, Any]
    personas: dict[str, Any]
    paraphrases: dict[str, Any]
    brand_chars: tuple[tuple[str, str], ...]


def read_vocab_file(name: str) -> dict[str, Any]:
    """One JSON table of the package's ``vocab/`` folder."""
    data = resources.files(__package__).joinpath("vocab").joinpath(name).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(data)
    return loaded


def _parse_slots(spec: str, where: str) -> tuple[AttributeSlot, ...]:
    slots: list[AttributeSlot] = []
    for token in spec.split():
        facet, _, body = token.rpartition(":")
        values = tuple(value for value in body.split("/") if value)
        if not values:
            raise DataError(f"{where}: empty attribute token {token!r}", code="vocabulary")
        slots.append(AttributeSlot(facet or DEFAULT_FACET, values))
    return tuple(slots)


def _overlaps(value: str, others: tuple[str, ...] | list[str]) -> bool:
    return any(value in other or other in value for other in others)


def _without(slots: tuple[AttributeSlot, ...], option_values: list[str]) -> tuple[AttributeSlot, ...]:
    """Drop attributes that are also option values ("罐装" as attribute and as 款式), which would blur the two."""
    kept = []
    for slot in slots:
        values = tuple(v for v in slot.values if not _overlaps(v, option_values))
        if values:
            kept.append(AttributeSlot(slot.facet, values))
    return tuple(kept)


def _with_common(
    slots: tuple[AttributeSlot, ...], common: str, noun: str, option_values: list[str]
) -> tuple[AttributeSlot, ...]:
    """Add the domain's common attributes that do not overlap a leaf attribute or the noun."""
    own = [value for slot in slots for value in slot.values]
    extra = [
        AttributeSlot(DEFAULT_FACET, (value,))
        for value in common.split()
        if not _overlaps(value, own) and not _overlaps(value, option_values) and value not in noun
    ]
    return slots + tuple(extra)


def _foreign_words(kinds: dict[str, str], item: dict[str, Any]) -> tuple[str, ...]:
    """The marker words of the domain's other kinds when the leaf's own text names exactly one kind
    (``{"猫": "猫", "狗": "狗 犬"}``: a 牵引绳 whose text says 遛狗 gets ``("猫",)``); none for a shared leaf."""
    own = " ".join(str(item.get(key, "")) for key in ("leaf", "noun", "syn", "attrs", "use"))
    named = [kind for kind, markers in kinds.items() if any(m in own for m in markers.split())]
    if len(named) != 1:
        return ()
    return tuple(m for kind, markers in kinds.items() if kind != named[0] for m in markers.split())


def _parse_axis(spec: str, pools: dict[str, list[str]], where: str) -> Axis:
    if "@" in spec:
        head, _, pool = spec.partition("@")
        if pool not in pools:
            raise DataError(f"{where}: unknown pool {pool!r}", code="vocabulary")
        values = tuple(pools[pool])
    elif "=" in spec:
        head, _, body = spec.partition("=")
        values = tuple(body.split())
    else:
        raise DataError(f"{where}: axis spec {spec!r} needs '=values' or '@pool'", code="vocabulary")
    ordered = head.endswith("$")
    name = head.rstrip("$")
    if len(values) < 2 or len(set(values)) != len(values):
        raise DataError(f"{where}: axis {name!r} needs at least two distinct values", code="vocabulary")
    return Axis(name, values, ordered)


@lru_cache(maxsize=1)
def load_vocabulary() -> Vocabulary:
    """Parse every vocabulary file once (the result is immutable and shared)."""
    catalog = read_vocab_file("catalog.json")
    pools = {key: value for key, value in read_vocab_file("pools.json").items() if not key.startswith("_")}
    text = read_vocab_file("text.json")
    leaves: list[Leaf] = []
    domains: list[str] = []
    for domain in catalog["domains"]:
        domains.append(domain["name"])
        common = domain.get("common", "")
        tags = tuple(domain["tags"].split())
        for sub, items in domain["subs"].items():
            for item in items:
                where = f"{domain['name']}›{sub}›{item['leaf']}"
                low, high = item["price"]
                axes = tuple(_parse_axis(spec, pools, where) for spec in item["axes"])
                option_values = [value for axis in axes for value in axis.values]
                slots = _without(_parse_slots(item["attrs"], where), option_values)
                slots = _with_common(slots, common, item["noun"], option_values)
                attributes = [value for slot in slots for value in slot.values]
                foreign = _foreign_words(domain.get("kinds", {}), item)
                words = tuple(w for w in domain["words"].split()
                              if not _overlaps(w, attributes) and not any(f in w for f in foreign))
                leaves.append(
                    Leaf(
                        domain=domain["name"],
                        sub=sub,
                        name=item["leaf"],
                        noun=item["noun"],
                        synonyms=tuple(item["syn"].split()),
                        unit=item.get("unit", domain.get("unit", text["units_default"])),
                        price_range=(float(low), float(high)),
                        slots=slots,
                        axes=axes,
                        uses=tuple(item["use"].split()),
                        has_model_code=bool(item.get("code", domain.get("code", False))),
                        words=words,
                        tags=tags,
                        facets={value: slot.facet for slot in slots for value in slot.values},
                        neutral=tuple(
                            syn for syn in item["syn"].split() if not any(a in syn for a in attributes)
                        ),
                        foreign=foreign,
                    )
                )
    names = [leaf.name for leaf in leaves]
    if len(set(names)) != len(names):
        raise DataError("leaf names must be unique", code="vocabulary")
    brand_chars = tuple((token[0], token[1:]) for token in text["brand_chars"].split())
    return Vocabulary(
        leaves=tuple(leaves),
        domains=tuple(domains),
        text=text,
        budgets=read_vocab_file("budgets.json"),
        personas=read_vocab_file("personas.json"),
        paraphrases=read_vocab_file("paraphrases.json"),
        brand_chars=brand_chars,
    )
