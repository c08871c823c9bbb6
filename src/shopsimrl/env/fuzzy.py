"""Token-set fuzzy ratio (env_spec §6.3), the fuzzywuzzy ``token_set_ratio`` definition over difflib."""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from functools import lru_cache

_NON_WORD = re.compile(r"\W+")


def _ratio(a: str, b: str) -> int:
    return round(100 * SequenceMatcher(None, a, b).ratio())


@lru_cache(maxsize=65536)
def token_set_ratio(a: str, b: str) -> int:
    left = set(_NON_WORD.sub(" ", str(a).casefold()).split())
    right = set(_NON_WORD.sub(" ", str(b).casefold()).split())
    common = left & right
    joined_common = " ".join(sorted(common))
    joined_left = " ".join(sorted(common | (left - right)))
    joined_right = " ".join(sorted(common | (right - left)))
    if not joined_common:
        return _ratio(joined_left, joined_right)
    return max(
        _ratio(joined_common, joined_left), _ratio(joined_common, joined_right), _ratio(joined_left, joined_right)
    )
