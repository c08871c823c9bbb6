"""What the shopper borrows from the generator's vocabulary: attribute paraphrases and leaf nouns (read only)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def load_vocabulary() -> Any:
    """The generator's vocabulary, imported on first use (plain resets never load the generator package)."""
    from ..generate.vocabulary import load_vocabulary as load

    return load()


@lru_cache(maxsize=1)
def paraphrases() -> dict[str, tuple[str, ...]]:
    """Attribute keyword → the shopper's own words for it (``防滑`` → ``不打滑``, ``不容易滑``)."""
    table = load_vocabulary().paraphrases.get("phrases", {})
    return {str(key): tuple(str(value) for value in values) for key, values in sorted(table.items())}


@lru_cache(maxsize=1)
def leaf_nouns() -> dict[str, tuple[str, ...]]:
    """Leaf category path (``a›b›c``) → the noun and its synonyms, as instructions name the product."""
    return {leaf.category: (leaf.noun, *leaf.synonyms) for leaf in load_vocabulary().leaves}


@lru_cache(maxsize=1)
def seller_decorations() -> tuple[tuple[str, str], ...]:
    """(prefix, suffix) pairs that sellers wrap a plain option value in (``{v}【现货速发】``, ``【{v}】经典款``).

    Read from the generator's seller-option patterns, longest first, so the shopper can say the plain value
    (``黑色``) the way its request does instead of the listing's seller string.
    """
    table: dict[str, Any] = load_vocabulary().text.get("seller_options", {})
    pairs: set[tuple[str, str]] = set()
    for key, templates in table.items():
        if key.startswith("_doc") or not isinstance(templates, list):
            continue
        for template in templates:
            template = str(template)
            if key == "featured":
                pairs.add(("", template))
            elif "{v}" in template:
                prefix, _, suffix = template.partition("{v}")
                pairs.add((prefix, suffix))
    # generator v6 long strings: the plain value, one spec of the axis, one gift (``黑色 升级加厚款【送清洁刷】``)
    specs, gifts = table.get("long_specs", {}), table.get("long_gifts", {})
    if isinstance(specs, dict) and isinstance(gifts, dict):
        every_gift = {str(gift) for group in gifts.values() if isinstance(group, list) for gift in group}
        for spec in {str(spec) for group in specs.values() if isinstance(group, list) for spec in group}:
            pairs.update(("", spec + gift) for gift in every_gift)
    return tuple(sorted(pairs, key=lambda pair: (-len(pair[0]) - len(pair[1]), pair)))


@lru_cache(maxsize=1)
def attribute_words() -> frozenset[str]:
    """Every attribute keyword and paraphrase of the vocabulary (two characters or more), casefolded.

    The lexicon uses it to recognise a question about an attribute that is not in the goal (``需要防水吗`` for
    a pillow) and answer it neutrally instead of volunteering the goal's own attributes.
    """
    words: set[str] = set()
    for leaf in load_vocabulary().leaves:
        words.update(leaf.all_attributes())
    for keyword, phrases in paraphrases().items():
        words.add(keyword)
        words.update(phrases)
    return frozenset(word.casefold() for word in words if len(word) >= 2)


@lru_cache(maxsize=1)
def longest_attribute_word() -> int:
    return max((len(word) for word in attribute_words()), default=0)


@lru_cache(maxsize=1)
def attribute_initials() -> frozenset[str]:
    """First characters of the attribute words: positions starting with anything else are skipped."""
    return frozenset(word[0] for word in attribute_words())
