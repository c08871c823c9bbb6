"""What one cached query holds: the ranked ASINs and scores (``Ranking``), the ``SearchHit`` objects made from
them on first use, and the bytes an entry is charged in ``SearchIndex``'s bounded cache."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

from ..bounded_cache import strings_bytes


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked result: 1-based ``rank``, ``asin`` and ``score`` = -bm25 (higher is better)."""

    rank: int
    asin: str
    score: float


class Ranking:
    """One cache entry: the ASINs in rank order (shared by every caller that needs only them) and the scores;
    the ``SearchHit`` objects are made on first use.

    Why: the environment keeps only ASINs, and hit objects about double an entry's memory (default catalog,
    k = 150: 12 KB without them, 23 KB with them), which matters with tens of thousands of entries.
    """

    __slots__ = ("_hits", "asins", "scores")

    def __init__(self, asins: tuple[str, ...], scores: array[float]) -> None:
        self.asins = asins
        self.scores = scores
        self._hits: tuple[SearchHit, ...] | None = None

    def hits(self) -> tuple[SearchHit, ...]:
        """The hits, made once (two threads may both make them; the results are equal)."""
        hits = self._hits
        if hits is None:
            pairs = zip(self.asins, self.scores, strict=True)
            hits = self._hits = tuple(SearchHit(rank, asin, score) for rank, (asin, score) in enumerate(pairs, 1))
        return hits


def entry_bytes(args: tuple[Any, ...], ranking: Ranking) -> int:
    """An entry's key (the token tuple) and its ranking, with the hits ``search`` may add (about as much again)."""
    asins = strings_bytes(ranking.asins)
    return strings_bytes(args[0]) + 2 * (asins + ranking.scores.buffer_info()[1] * ranking.scores.itemsize)
