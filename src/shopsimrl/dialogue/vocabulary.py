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
