"""Token-set fuzzy ratio (docs/contract.md#fuzzy-ratio): the fuzzywuzzy ``token_set_ratio`` definition over difflib.

Written from the definition rather than taken from a fuzzy-matching library so that rounding (Python's
banker's ``round``) and tokenisation (Unicode ``\\W+``) are exactly the contract's.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from ..bounded_cache import FUZZY_BYTES, BoundedMemo, text_bytes

_NON_WORD = re.compile(r"\W+")


def tokens(value: str) -> frozenset[str]:
    """Casefolded word tokens: every run of non-word characters separates tokens."""
    return frozenset(_NON_WORD.sub(" ", value.casefold()).split())


def ratio(a: str, b: str) -> int:
    """``round(100 × SequenceMatcher(None, a, b).ratio())``; two empty strings give 100 (difflib's rule)."""
    return round(100 * SequenceMatcher(None, a, b).ratio())


def _token_set_ratio(a: str, b: str) -> int:
    """Similarity in 0..100 of two values' token sets; a subset of the other's tokens scores 100."""
    left = tokens(str(a))
    right = tokens(str(b))
    common = left & right
    joined_common = " ".join(sorted(common))
    joined_left = " ".join(sorted(left))  # = sorted(I ∪ left-only)
    joined_right = " ".join(sorted(right))  # = sorted(I ∪ right-only)
    if not joined_common:
        return ratio(joined_left, joined_right)
    return max(ratio(joined_common, joined_left), ratio(joined_common, joined_right), ratio(joined_left, joined_right))


#: ``_token_set_ratio``, memoised within a byte budget (the pairs come from catalogs and traces).
token_set_ratio = BoundedMemo(_token_set_ratio, maxsize=65536, max_bytes=FUZZY_BYTES,
                              size_of=lambda args, _: sum(text_bytes(str(v)) for v in args))
