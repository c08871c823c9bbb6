"""One query phrase's postings (its matched rows and their bm25 terms) and the sorted-row look-up every rank
path uses on them; ``Postings`` makes and caches the phrases, ``_postings`` ranks with them."""

from __future__ import annotations

import numpy as np

from ..bounded_cache import text_bytes


def lookup(docs: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``docs``, indices into ``rows`` found there) for sorted ``docs``."""
    if not docs.size:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    where = np.searchsorted(docs, rows)
    np.minimum(where, docs.size - 1, out=where)
    return where, np.flatnonzero(docs[where] == rows)


class Phrase:
    """One query phrase's matched rows (ascending) and each row's bm25 term; ``bound`` is their maximum."""

    __slots__ = ("_bound", "docs", "terms")

    def __init__(self, docs: np.ndarray, terms: np.ndarray) -> None:
        self.docs = docs
        self.terms = terms
        self._bound: float | None = None

    @property
    def bound(self) -> float:
        """The largest term, computed on first use (two threads may both compute it; the values are equal)."""
        bound = self._bound
        if bound is None:
            bound = self._bound = float(self.terms.max()) if self.terms.size else 0.0
        return bound


EMPTY = Phrase(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64))


def phrase_bytes(args: tuple[object, ...], phrase: Phrase | None) -> int:
    """A cached phrase's key and the arrays it owns (a one-term phrase is a view of the postings: free)."""
    size = text_bytes(str(args[0]))
    if phrase is not None:
        size += sum(a.nbytes for a in (phrase.docs, phrase.terms) if a.base is None)
    return size
