"""In-memory postings of an FTS5 index and FTS5's own ``bm25()`` computed from them, exactly.

Why: SQLite spends most of a search computing ``bm25()`` row by row through the auxiliary-function API
(docs/contract.md#search-ranking); the same arithmetic over numpy arrays is an order of magnitude faster. SQLite stays the
index and the source of truth: the postings are rebuilt from the FTS table's stored columns and then checked
against SQLite's own bookkeeping (the ``fts5vocab`` term list with per-term row and instance counts, the
per-row column sizes in ``products_docsize`` and the row/token totals of the averages record), and a query the
emulated tokenizer cannot vouch for is answered by SQLite.

Exactness: the score is FTS5's ``fts5Bm25Function`` step by step in IEEE double — the per-phrase frequency is
the column weights summed one instance at a time in (column, offset) order, as ``xInst`` delivers them; IDF is
``ln((N - n + 0.5) / (n + 0.5))`` with ``n`` the rows matching the phrase, replaced by 1e-6 when ≤ 0; the
length term is ``k1 * (1 - b + b * |D| / avgdl)``, with |D| the row's token count over all columns and avgdl
the total token count divided by the row count; phrases are summed in query order. ``SearchIndex`` also
compares this path with SQLite on sample queries when it opens and falls back to SQLite on any difference.

The phrases' own arrays are ``_phrases``, the tokenizer tables ``_unicode61``, the builder ``_postings_build``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..bounded_cache import PHRASE_BYTES, BoundedMemo
from ..errors import ShopSimError
from ._phrases import EMPTY, Phrase, lookup, phrase_bytes
from ._unicode61 import ASCII_SEPARATORS, ASCII_UPPER, sqlite_han_token_chars

K1 = 1.2  # FTS5's constants (fts5_aux.c)
B = 0.75
_K1_PLUS_1 = K1 + 1.0
_IDF_FLOOR = 1e-6
_KEY_COL_SHIFT = 32
_KEY_DOC_SHIFT = 35
#: Score buffers kept for reuse (one per query running at the same time; more are made and dropped as needed).
_FREE_SCORE_BUFFERS = 4
#: From this many postings (and _PRUNE_PER_K a hit wanted) a query prunes (``_pruned``); below, it sums every
#: phrase, by a pass over all rows (``_scanned``) when the postings are at least 1/_SCAN_RATIO of the rows, else
#: over the matched rows alone (``_summed``). Measured crossovers on 23k, 227k and 1.1M rows.
_PRUNE_POSTINGS = 50_000
_PRUNE_PER_K = 64
_SCAN_RATIO = 8
#: Pruning refines its threshold once (_ESTIMATES), before adding a phrase of _ESTIMATE_FROM rows or more, from the
#: fuller scores of the _ESTIMATE_PER_K * k best partial rows (measured on the 50x catalog's queries).
_ESTIMATE_FROM = 4096
_ESTIMATE_PER_K = 8
_ESTIMATES = 1
#: Relative margins that keep the pruning bounds safe against rounding of sums taken in another order.
_UP = 1.0 + 1e-9
_DOWN = 1.0 - 1e-9


class PostingsUnavailable(ShopSimError):
    """The postings could not be built or do not agree with SQLite's own statistics (the reason is the text)."""


class Postings:
    """Per-term postings of one FTS5 table plus the length statistics ``bm25()`` uses; read-only, thread-safe."""

    def __init__(
        self,
        *,
        rowids: np.ndarray,
        doc_lengths: np.ndarray,
        total_tokens: int,
        term_ids: dict[str, int],
        pair_offsets: np.ndarray,
        pair_docs: np.ndarray,
        pair_freq_codes: np.ndarray,
        freq_values: np.ndarray,
        position_bounds: np.ndarray,
        position_keys: np.ndarray,
        column_weights: Sequence[float],
        tie_rank: np.ndarray,
        pair_contrib: np.ndarray | None = None,
    ) -> None:
        self.rowids = rowids
        self.n_rows = int(rowids.size)
        self.total_tokens = total_tokens
        self.avgdl = float(total_tokens) / float(self.n_rows)
        #: k1 * (1 - b + b * |D| / avgdl) per row, in fts5Bm25Function's operation order.
        self._length_term = K1 * ((1 - B) + (B * doc_lengths.astype(np.float64)) / self.avgdl)
        self._term_ids = term_ids
        self._pair_offsets = pair_offsets
        self._pair_docs = pair_docs
        self._pair_freq_codes = pair_freq_codes
        self._freq_values = freq_values
        #: (begin, end) into ``position_keys`` per term id; (0, 0) for terms without positions (non-ASCII).
        self._position_bounds = position_bounds
        self._position_keys = position_keys
        self._weights = tuple(float(w) for w in column_weights)
        self._tie_rank = tie_rank
        self._doc_lengths = doc_lengths
        #: Characters of the index's own terms: unicode61 keeps each of them as itself.
        self._known_chars = frozenset("".join(term_ids))
        #: Each (term, row) pair's whole bm25 term, ``idf * tf-part``, computed as ``rank`` would (same IEEE
        #: operations in the same order), so a one-term phrase costs one scatter-add instead of six array passes.
        self._pair_contrib = self._contributions() if pair_contrib is None else pair_contrib
        # Cached phrases are views of the arrays above (or small arrays for ASCII multi-term phrases).
        self._phrase = BoundedMemo(self._phrase_postings, maxsize=1 << 16, max_bytes=PHRASE_BYTES, size_of=phrase_bytes)
        #: Zeroed per-row score buffers between queries (see ``_take_buffer``); at most _FREE_SCORE_BUFFERS kept.
        self._free_scores: list[np.ndarray] = []

    def _contributions(self, block: int = 1 << 22) -> np.ndarray:
        """``idf(term) * (freq * (k1 + 1)) / (freq + length_term[row])`` for every pair, in blocks of pairs."""
        counts = np.diff(self._pair_offsets)
        idf = np.empty(counts.size, dtype=np.float64)
        n_rows = self.n_rows
        for term, hits in enumerate(counts.tolist()):
            value = math.log((n_rows - hits + 0.5) / (hits + 0.5))
            idf[term] = value if value > 0.0 else _IDF_FLOOR
        term_of_pair = np.repeat(np.arange(counts.size, dtype=np.int32), counts)
        out = np.empty(self._pair_docs.size, dtype=np.float64)
        for begin in range(0, out.size, block):
            end = min(begin + block, out.size)
            freq = self._freq_values[self._pair_freq_codes[begin:end]]
            part = (freq * _K1_PLUS_1) / (freq + self._length_term[self._pair_docs[begin:end]])
            out[begin:end] = idf[term_of_pair[begin:end]] * part
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held by the numpy arrays (the term dictionary comes on top)."""
        arrays = (self.rowids, self._length_term, self._pair_offsets, self._pair_docs, self._pair_freq_codes,
                  self._freq_values, self._position_keys, self._tie_rank, self._pair_contrib)
        return sum(a.nbytes for a in arrays)

    # -- stored form ---------------------------------------------------------------------------------------

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays that ``from_arrays`` needs, by name (what ``prepare`` writes as ``.npy`` files)."""
        return {
            "rowids": self.rowids, "doc_lengths": self._doc_lengths, "pair_offsets": self._pair_offsets,
            "pair_docs": self._pair_docs, "pair_freq_codes": self._pair_freq_codes, "freq_values": self._freq_values,
            "position_bounds": self._position_bounds, "position_keys": self._position_keys, "tie_rank": self._tie_rank,
            "pair_contrib": self._pair_contrib,
        }

    @property
    def terms(self) -> list[str]:
        """The FTS5 terms in term-id order."""
        return list(self._term_ids)

    @property
    def column_weights(self) -> tuple[float, ...]:
        return self._weights

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, np.ndarray], terms: Sequence[str], total_tokens: int, column_weights: Sequence[float]
    ) -> Postings:
        """Postings over stored arrays (typically memory-mapped): nothing is recomputed but the length term."""
        return cls(
            rowids=arrays["rowids"], doc_lengths=arrays["doc_lengths"], total_tokens=total_tokens,
            term_ids={term: i for i, term in enumerate(terms)}, pair_offsets=arrays["pair_offsets"],
            pair_docs=arrays["pair_docs"], pair_freq_codes=arrays["pair_freq_codes"],
            freq_values=arrays["freq_values"], position_bounds=arrays["position_bounds"],
            position_keys=arrays["position_keys"], column_weights=column_weights, tie_rank=arrays["tie_rank"],
            pair_contrib=arrays["pair_contrib"],
        )

    # -- querying ------------------------------------------------------------------------------------------

    def _phrase_postings(self, token: str) -> Phrase | None:
        """The rows and bm25 terms of one quoted query phrase; ``None`` when SQLite must answer."""
        for ch in token:
            if ch in ASCII_UPPER or (
                not ch.isascii() and ch not in self._known_chars and ch not in sqlite_han_token_chars()
            ):
                return None
        terms = token.translate(ASCII_SEPARATORS).split()
        if not terms:
            return None  # an empty phrase: FTS5's own business
        if len(terms) == 1:
            term = self._term_ids.get(terms[0])
            if term is None:
                return EMPTY
            begin, end = self._pair_offsets[term], self._pair_offsets[term + 1]
            return Phrase(self._pair_docs[begin:end], self._pair_contrib[begin:end])
        if not all(t.isascii() for t in terms):
            return None
        spans = []
        for t in terms:
            term = self._term_ids.get(t)
            if term is None:
                return EMPTY
            begin, end = self._position_bounds[term].tolist()
            spans.append(self._position_keys[begin:end])
        starts = spans[0]
        for shift, keys in enumerate(spans[1:], start=1):
            wanted = starts + shift
            where = np.searchsorted(keys, wanted)
            found = where < keys.size
            found[found] = keys[where[found]] == wanted[found]
            starts = starts[found]
        if not starts.size:
            return EMPTY
        docs = (starts >> _KEY_DOC_SHIFT).astype(np.int32)
        cols = ((starts >> _KEY_COL_SHIFT) & 0x7).tolist()
        out_docs: list[int] = []
        out_freq: list[float] = []
        for doc, col in zip(docs.tolist(), cols, strict=True):  # (column, offset) order within a row
            if out_docs and out_docs[-1] == doc:
                out_freq[-1] += self._weights[col]
            else:
                out_docs.append(doc)
                out_freq.append(0.0 + self._weights[col])
        rows = np.asarray(out_docs, dtype=np.int32)
        freqs = np.asarray(out_freq, dtype=np.float64)
        hits = rows.size
        idf = math.log((self.n_rows - hits + 0.5) / (hits + 0.5))
        if idf <= 0.0:
            idf = _IDF_FLOOR
        return Phrase(rows, idf * ((freqs * _K1_PLUS_1) / (freqs + self._length_term[rows])))

    def rank(self, tokens: Sequence[str], k: int) -> list[tuple[int, float]] | None:
        """Top-``k`` (rowid, -bm25) like ``ORDER BY bm25 ASC, asin ASC``; ``None`` when SQLite must answer.

        A row's score is its phrases' bm25 terms added in query order (fts5Bm25Function's loop), so that the
        sums are the same IEEE doubles as SQLite's; every term is > 0 (idf >= 1e-6, positive weights and
        lengths), so a row matched iff its score > 0. Few postings are summed directly (``_summed`` or
        ``_scanned``); many go through ``_pruned``, which skips the rows that cannot reach the top ``k``.
        """
        phrases = []
        for token in tokens:
            phrase = self._phrase(token)
            if phrase is None:
                return None
            if phrase.docs.size:
                phrases.append(phrase)
        if not phrases:
            return []
        if len(phrases) == 1:  # its rows are the candidates and its terms their scores (0.0 + x == x)
            return self._top(phrases[0].docs, phrases[0].terms, k)
        total = sum(phrase.docs.size for phrase in phrases)
        if total >= max(_PRUNE_POSTINGS, _PRUNE_PER_K * k):
            return self._pruned(phrases, k)
        if total * _SCAN_RATIO >= self.n_rows:
            return self._top(*self._scanned(phrases), k)
        return self._top(*self._summed(phrases), k)

    def _take_buffer(self) -> np.ndarray:
        """A zeroed per-row score buffer from the free list (or a new one).

        Why a free list: a fresh per-row array each query costs page faults linear in the catalog (9 MB at 1.2M
        products). Threads pop and push (atomic under the GIL; no lock that a fork could leave held); a buffer
        is pushed back only once its touched slots are zero again, so one an error left dirty is dropped.
        """
        try:
            return self._free_scores.pop()
        except IndexError:
            return np.zeros(self.n_rows, dtype=np.float64)

    def _give_back(self, scores: np.ndarray) -> None:
        if len(self._free_scores) < _FREE_SCORE_BUFFERS:
            self._free_scores.append(scores)

    @staticmethod
    def _add_phrase(scores: np.ndarray, phrase: Phrase, first: bool, track: bool = True) -> np.ndarray | None:
        """Add one phrase's terms to its rows' running scores; with ``track``, return the rows it touched first
        (those whose running score was still 0.0, which keeps the collected candidates unique)."""
        docs, terms = phrase.docs, phrase.terms
        if first:
            scores[docs] = terms  # every slot is 0.0 and 0.0 + x == x for x > 0
            return docs
        if not track:
            scores[docs] += terms
            return None
        running = scores[docs]
        new = docs[running == 0.0]
        running += terms  # the same IEEE additions as ``scores[docs] += terms``
        scores[docs] = running
        new_rows: np.ndarray = new
        return new_rows

    def _summed(self, phrases: list[Phrase]) -> tuple[np.ndarray, np.ndarray]:
        """(every matched row, its exact score): every phrase added in query order; linear in the postings."""
        scores = self._take_buffer()
        parts = [self._add_phrase(scores, phrase, i == 0) for i, phrase in enumerate(phrases)]
        candidates = np.concatenate([part for part in parts if part is not None])
        totals = scores[candidates]
        scores[candidates] = 0.0
        self._give_back(scores)
        return candidates, totals

    def _scanned(self, phrases: list[Phrase]) -> tuple[np.ndarray, np.ndarray]:
        """Like ``_summed``, but the matched rows are found by one pass over every row: cheaper when the postings
        are a good part of the rows (no per-phrase test for rows seen first)."""
        scores = self._take_buffer()
        for i, phrase in enumerate(phrases):  # query order
            self._add_phrase(scores, phrase, i == 0, track=False)
        candidates = np.flatnonzero(scores > 0.0)  # one vectorised pass (nonzero on float64 is ~7x slower)
        totals = scores[candidates]
        if candidates.size * _SCAN_RATIO >= self.n_rows:
            scores.fill(0.0)
        else:
            scores[candidates] = 0.0
        self._give_back(scores)
        return candidates, totals

    def _pruned(self, phrases: list[Phrase], k: int) -> list[tuple[int, float]]:
        """The top ``k`` without scoring every matched row (MaxScore, exact).

        Phrases are added highest bound (largest term) first until the bounds of those left sum to less than
        ``theta``, the k-th best partial score so far: a row in none of the added phrases then scores below
        the k-th best and is skipped (the left phrases' often very long postings are never read in full). A
        candidate whose partial score plus the left bounds stays below ``theta`` is dropped the same way, the
        rest are looked up in the left phrases, and the survivors get their exact scores, summed in query
        order. ``theta`` never exceeds the true k-th best score, and the margins cover the rounding of sums
        taken in another order, so the result is exactly that of ``_summed``.
        """
        n = len(phrases)
        bounds = [phrase.bound for phrase in phrases]
        order = sorted(range(n), key=lambda j: (-bounds[j], j))
        # left[i] / reach[i]: upper bounds of the sums of the bounds of order[i + 1:] / order[: i + 1]
        left = [math.fsum(bounds[j] for j in order[i + 1 :]) * _UP for i in range(n)]
        reach = [math.fsum(bounds[j] for j in order[: i + 1]) * _UP for i in range(n)]
        scores = self._take_buffer()  # not given back if this raises: its slots may be dirty
        theta = 0.0
        parts: list[np.ndarray] = []
        added = n
        estimates = 0
        for i, j in enumerate(order):
            new = self._add_phrase(scores, phrases[j], i == 0)
            if new is not None and new.size:
                parts.append(new)
            if i == n - 1 or left[i] >= reach[i]:  # last, or no partial score can exceed left[i] yet
                continue
            if len(parts) > 1:
                parts = [np.concatenate(parts)]
            if parts[0].size >= k:
                partial = scores[parts[0]]
                theta = max(theta, float(np.partition(partial, partial.size - k)[partial.size - k]) * _DOWN)
                if left[i] >= theta and estimates < _ESTIMATES and phrases[order[i + 1]].docs.size >= _ESTIMATE_FROM:
                    estimates += 1
                    theta = max(theta, self._fuller_theta(scores, parts[0], partial, [phrases[j] for j in order[i + 1 :]], k))
                if left[i] < theta:
                    added = i + 1
                    break
        candidates = parts[0] if len(parts) == 1 else np.concatenate(parts)
        partial = scores[candidates]
        scores[candidates] = 0.0
        self._give_back(scores)
        if added == n and candidates.size >= k:
            theta = max(theta, float(np.partition(partial, candidates.size - k)[candidates.size - k]) * _DOWN)
        # Drop candidates that cannot reach theta, look the rest up in the phrases not added (largest bound
        # first), raising theta as the partial scores grow.
        found_in: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # phrase → (candidate rows in it, their terms)
        for i in range(added - 1, n):
            if i >= added:
                phrase = phrases[order[i]]
                where, found = lookup(phrase.docs, candidates)
                rows, terms = candidates[found], phrase.terms[where[found]]
                found_in[order[i]] = (rows, terms)
                partial[found] += terms
                if candidates.size >= k:
                    theta = max(theta, float(np.partition(partial, candidates.size - k)[candidates.size - k]) * _DOWN)
            if theta > 0.0:
                keep = np.flatnonzero(partial * _UP + left[i] >= theta)
                if keep.size < candidates.size:
                    candidates, partial = candidates[keep], partial[keep]
            if i == added - 1:  # ascending rows make the look-ups walk each phrase's rows forwards
                ascending = np.argsort(candidates)
                candidates, partial = candidates[ascending], partial[ascending]
        # The survivors' exact scores, summed in query order.
        survivors = candidates
        exact = np.zeros(survivors.size, dtype=np.float64)
        for j, phrase in enumerate(phrases):
            if j in found_in:
                rows, terms = found_in[j]
                where, found = lookup(survivors, rows)
                exact[where[found]] += terms[found]
            else:
                where, found = lookup(phrase.docs, survivors)
                exact[found] += phrase.terms[where[found]]
        return self._top(survivors, exact, k)

    @staticmethod
    def _fuller_theta(scores: np.ndarray, rows: np.ndarray, partial: np.ndarray, later: list[Phrase], k: int) -> float:
        """Before adding a long phrase: the best partial rows' scores with every phrase left (``later``) are real
        scores, so their k-th best is a safe theta, often far higher than the partial one."""
        m = min(partial.size, _ESTIMATE_PER_K * k)
        best = np.sort(rows[np.argpartition(partial, partial.size - m)[partial.size - m :]])
        fuller = scores[best]
        for phrase in later:
            where, found = lookup(phrase.docs, best)
            fuller[found] += phrase.terms[where[found]]
        return float(np.partition(fuller, m - k)[m - k]) * _DOWN

    def _top(self, candidates: np.ndarray, values: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` best (rowid, score) of the candidates, ties by the rows' ASIN rank."""
        if candidates.size > k:
            threshold = np.partition(values, candidates.size - k)[candidates.size - k]
            keep = values >= threshold  # every row tied with the k-th best stays for the tie-break
            candidates, values = candidates[keep], values[keep]
        order = np.lexsort((self._tie_rank[candidates], -values))[:k]
        return list(zip(self.rowids[candidates[order]].tolist(), values[order].tolist(), strict=True))
