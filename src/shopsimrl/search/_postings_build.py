"""Building the postings arrays from an FTS5 table a chunk of rows at a time, with bounded memory.

Why chunks: the one-shot build held about 60 bytes for every token instance of the whole catalog at once (term,
row, column, offset, a sort order and their sorted copies): 8.5 GB of ``prepare``'s peak at 1.17M products. Here
one chunk of rows is tokenised, sorted by term and reduced to (term, row, frequency) pairs and ASCII positions,
which go to a spill (a temporary file when ``prepare`` builds, memory when an index is opened); the final arrays
are then gathered a block of terms at a time from every chunk's run (each run is sorted by term, so a block is one
slice of each run, and chunks hold ascending rows) and written in their final (term, row) order to a sink: numpy
arrays in memory, or ``.npy`` files written sequentially (``stored``).

Exactness: the arrays equal the one-shot build's bit for bit. A pair's frequency is the column weights summed one
instance at a time in (column, offset) order within its row, which a chunk holds whole; codes index the sorted
distinct frequencies of all pairs; contributions repeat ``Postings._contributions``'s operations element by element.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ._postings import _IDF_FLOOR, _K1_PLUS_1, K1, B, Postings, PostingsUnavailable
from ._postings_scan import Runs, Scan, TermLookup, scan_rows

#: Rows tokenised at a time (about 60 token instances a row on the default catalog: ~0.1 GB of transients).
DOC_CHUNK = 1 << 15
#: Token instances (and so at most pairs or positions) gathered at a time when writing the final arrays.
TERM_BLOCK = 1 << 22
class ArrayWriter(Protocol):
    """One output array, filled front to back in blocks."""

    def write(self, block: np.ndarray) -> None: ...

    def close(self) -> None: ...


class ArraySink(Protocol):
    """Where the finished arrays go (``open`` is called once per name, with the final dtype and shape)."""

    def open(self, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> ArrayWriter: ...


class _MemoryWriter:
    def __init__(self, array: np.ndarray) -> None:
        self._flat = array.reshape(-1)
        self._at = 0

    def write(self, block: np.ndarray) -> None:
        size = int(block.size)
        self._flat[self._at : self._at + size] = block.reshape(-1)
        self._at += size

    def close(self) -> None:
        if self._at != self._flat.size:
            raise PostingsUnavailable(f"an array was filled with {self._at} of its {self._flat.size} values")


class MemorySink:
    """The arrays as numpy arrays, by name (for opening an index that ``prepare`` did not store)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def open(self, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> ArrayWriter:
        array = np.empty(shape, dtype=dtype)
        self.arrays[name] = array
        return _MemoryWriter(array)


@dataclass(frozen=True)
class BuiltPostings:
    """What the arrays need beside themselves: the terms in id order and the token total."""

    terms: list[str]
    total_tokens: int


def build_postings(
    connection: sqlite3.Connection,
    columns: Sequence[str],
    column_weights: Sequence[float],
    tie_rank_of_rowid: dict[int, int],
    sink: ArraySink,
    *,
    spill_dir: Path | None = None,
    doc_chunk: int = DOC_CHUNK,
    term_block: int = TERM_BLOCK,
) -> BuiltPostings:
    """Write the ``Postings.arrays()`` of the FTS table ``products`` (``columns[0]`` UNINDEXED) into ``sink``.

    Needs the ``temp.shopsimrl_vocab`` fts5vocab table; every count is checked against SQLite's own bookkeeping.
    ``spill_dir``: where the chunk runs are spilled (None: kept in memory). ``doc_chunk`` and ``term_block``
    bound the transients; they never change the result.

    Raises:
        PostingsUnavailable: the table is empty or its statistics differ from what its stored text gives.
        sqlite3.Error: the table cannot be read.
    """
    if doc_chunk < 1 or term_block < 1:
        raise ValueError("doc_chunk and term_block must be positive")
    vocab = connection.execute("SELECT term, doc, cnt FROM temp.shopsimrl_vocab").fetchall()
    terms = [term for term, _, _ in vocab]
    n_terms = len(terms)
    expected_docs = np.fromiter((d for _, d, _ in vocab), dtype=np.int64, count=n_terms)
    expected_cnt = np.fromiter((c for _, _, c in vocab), dtype=np.int64, count=n_terms)
    ascii_terms = np.fromiter((term.isascii() for term in terms), dtype=bool, count=n_terms)
    del vocab
    # Term blocks of about ``term_block`` instances by SQLite's counts (any partition gives the same arrays).
    cumulative = np.cumsum(expected_cnt)
    cuts = np.searchsorted(cumulative, np.arange(term_block, int(cumulative[-1]) if n_terms else 0, term_block), "right")
    edges = np.unique(np.concatenate(([0], cuts, [n_terms]))).astype(np.int64)
    del cumulative, cuts
    weights = np.asarray(column_weights, dtype=np.float64)
    runs = Runs(spill_dir)
    try:
        scan = scan_rows(connection, columns, weights, TermLookup({term: i for i, term in enumerate(terms)}),
                         ascii_terms, edges, runs, doc_chunk)
        runs.flush()
        docs_per_term, cnt_per_term = scan.docs_per_term, scan.cnt_per_term
        if not (np.array_equal(docs_per_term, expected_docs) and np.array_equal(cnt_per_term, expected_cnt)):
            bad = int(np.flatnonzero((docs_per_term != expected_docs) | (cnt_per_term != expected_cnt))[0])
            raise PostingsUnavailable(f"row/instance counts of term {terms[bad]!r} differ from fts5vocab")
        n_pairs, n_positions, code_type = _write_row_arrays(sink, scan, ascii_terms, tie_rank_of_rowid)
        _write_pair_arrays(sink, runs, scan, edges, n_pairs, n_positions, code_type)
        return BuiltPostings(terms, scan.total_tokens)
    finally:
        runs.close()


def _write_row_arrays(
    sink: ArraySink, scan: Scan, ascii_terms: np.ndarray, tie_rank_of_rowid: dict[int, int]
) -> tuple[int, int, np.dtype]:
    """Write the per-row and per-term arrays; return the pair and position counts and the frequency code type."""
    docs_per_term, cnt_per_term = scan.docs_per_term, scan.cnt_per_term
    n_terms = int(ascii_terms.size)
    rowids, doc_lengths = scan.rowids, scan.doc_lengths
    n_docs = int(rowids.size)
    _write(sink, "rowids", rowids)
    _write(sink, "doc_lengths", doc_lengths)
    pair_offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(docs_per_term, out=pair_offsets[1:])
    _write(sink, "pair_offsets", pair_offsets)
    freq_values = scan.freq_values
    code_type = np.dtype(np.uint16 if freq_values.size <= 1 << 16 else np.uint32)
    _write(sink, "freq_values", freq_values)
    position_counts = np.where(ascii_terms, cnt_per_term, 0)
    position_end = np.cumsum(position_counts)
    position_bounds = np.zeros((n_terms, 2), dtype=np.int64)
    has = position_counts > 0
    position_bounds[has, 0] = (position_end - position_counts)[has]
    position_bounds[has, 1] = position_end[has]
    _write(sink, "position_bounds", position_bounds)
    tie_rank = np.fromiter((tie_rank_of_rowid[r] for r in rowids.tolist()), dtype=np.int64, count=n_docs)
    _write(sink, "tie_rank", tie_rank)
    del tie_rank, position_bounds, position_end, has
    return int(pair_offsets[-1]), int(position_counts.sum()), code_type


def _write_pair_arrays(
    sink: ArraySink, runs: Runs, scan: Scan, edges: np.ndarray, n_pairs: int, n_positions: int, code_type: np.dtype
) -> None:
    """Write the per-pair arrays (rows, frequency codes, bm25 contributions) and the position keys, gathered a
    block of terms at a time from every run."""
    docs_per_term, doc_lengths, freq_values = scan.docs_per_term, scan.doc_lengths, scan.freq_values
    n_terms, n_docs = int(docs_per_term.size), int(scan.rowids.size)
    # bm25's per-term and per-row factors, as ``Postings`` computes them.
    idf = np.empty(n_terms, dtype=np.float64)
    for term, hits in enumerate(docs_per_term.tolist()):
        value = math.log((n_docs - hits + 0.5) / (hits + 0.5))
        idf[term] = value if value > 0.0 else _IDF_FLOOR
    avgdl = float(scan.total_tokens) / float(n_docs)
    length_term = K1 * ((1 - B) + (B * doc_lengths.astype(np.float64)) / avgdl)
    pair_docs = sink.open("pair_docs", np.dtype(np.int32), (n_pairs,))
    pair_codes = sink.open("pair_freq_codes", code_type, (n_pairs,))
    pair_contrib = sink.open("pair_contrib", np.dtype(np.float64), (n_pairs,))
    position_keys = sink.open("position_keys", np.dtype(np.int64), (n_positions,))
    for block in range(edges.size - 1):
        block_terms, block_docs, block_freq = _gather(runs, scan.pair_bounds, block, (0, 1, 2))
        codes = np.searchsorted(freq_values, block_freq).astype(code_type)
        pair_docs.write(block_docs.astype(np.int32, copy=False))
        pair_codes.write(codes)
        frequency = freq_values[codes]
        part = (frequency * _K1_PLUS_1) / (frequency + length_term[block_docs])
        pair_contrib.write(idf[block_terms] * part)
        del block_terms, block_docs, block_freq, codes, frequency, part
        position_keys.write(_gather(runs, scan.position_bounds, block, (3, 4))[1])
    for writer in (pair_docs, pair_codes, pair_contrib, position_keys):
        writer.close()


def _write(sink: ArraySink, name: str, array: np.ndarray) -> None:
    writer = sink.open(name, array.dtype, tuple(int(n) for n in array.shape))
    writer.write(array)
    writer.close()


def _gather(runs: Runs, bounds: list[np.ndarray], block: int, parts: tuple[int, ...]) -> list[np.ndarray]:
    """One term block's entries from every run, in (term, row, ...) order: runs hold ascending rows, so a stable
    sort by term of their concatenation is the order a one-shot stable sort gives."""
    pieces = [[runs.read(run, part, int(b[block]), int(b[block + 1])) for part in parts] for run, b in enumerate(bounds)]
    joined = [np.concatenate([piece[i] for piece in pieces]) for i in range(len(parts))]
    if len(pieces) > 1 and joined[0].size > 1:
        order = np.argsort(joined[0], kind="stable")
        joined = [array[order] for array in joined]
    return joined


def postings_in_memory(
    connection: sqlite3.Connection,
    columns: Sequence[str],
    column_weights: Sequence[float],
    tie_rank_of_rowid: dict[int, int],
) -> Postings:
    """Build in memory from the FTS table ``products`` (``columns[0]`` UNINDEXED); raise ``PostingsUnavailable``
    on doubt. Here, not on :class:`Postings`, so that the reader never imports its builder."""
    sink = MemorySink()
    try:
        built = build_postings(connection, columns, column_weights, tie_rank_of_rowid, sink)
    except sqlite3.Error as exc:
        raise PostingsUnavailable(f"cannot read the FTS5 statistics: {exc}") from exc
    return Postings.from_arrays(sink.arrays, built.terms, built.total_tokens, column_weights)
