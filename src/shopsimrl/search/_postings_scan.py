"""The scan pass of the postings build: the FTS table's stored rows, a chunk of rows at a time, tokenised as
unicode61 split them (``TermLookup``) and reduced to term-sorted runs of (term, row, frequency) pairs and ASCII
positions, kept in memory or spilled to a temporary file (``Runs``); each chunk's column sizes are checked against
SQLite's ``products_docsize`` and the totals against its averages record. ``_postings_build`` gathers the runs
into the final arrays.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._postings import _KEY_COL_SHIFT, _KEY_DOC_SHIFT, PostingsUnavailable
from ._unicode61 import SEPARATOR_TABLE


class Runs:
    """Each chunk's term-sorted pairs and positions, kept in memory or appended to an unlinked temporary file."""

    def __init__(self, spill_dir: Path | None) -> None:
        self._file = tempfile.TemporaryFile(dir=spill_dir) if spill_dir is not None else None  # noqa: SIM115
        self._end = 0
        #: Per run, per part: the array itself (memory) or (byte offset, dtype) in the file.
        self._parts: list[list[np.ndarray | tuple[int, np.dtype]]] = []

    def add(self, *arrays: np.ndarray) -> None:
        if self._file is None:
            self._parts.append(list(arrays))
            return
        parts: list[np.ndarray | tuple[int, np.dtype]] = []
        for array in arrays:
            data = np.ascontiguousarray(array)
            self._file.write(data.data)
            parts.append((self._end, data.dtype))
            self._end += data.nbytes
        self._parts.append(parts)

    def read(self, run: int, part: int, begin: int, end: int) -> np.ndarray:
        stored = self._parts[run][part]
        if isinstance(stored, np.ndarray):
            return stored[begin:end]
        assert self._file is not None
        offset, dtype = stored
        size = (end - begin) * dtype.itemsize
        data = os.pread(self._file.fileno(), size, offset + begin * dtype.itemsize) if size else b""
        if len(data) != size:
            raise PostingsUnavailable("the postings spill file was cut short")
        return np.frombuffer(data, dtype=dtype)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        self._parts = []
        if self._file is not None:
            self._file.close()


@dataclass
class Scan:
    rowids: np.ndarray
    doc_lengths: np.ndarray
    total_tokens: int
    docs_per_term: np.ndarray
    cnt_per_term: np.ndarray
    freq_values: np.ndarray
    #: Per run, where each term block begins in its pairs / positions (``edges.size`` entries).
    pair_bounds: list[np.ndarray]
    position_bounds: list[np.ndarray]


def scan_rows(
    connection: sqlite3.Connection,
    columns: Sequence[str],
    weights: np.ndarray,
    lookup: TermLookup,
    ascii_terms: np.ndarray,
    edges: np.ndarray,
    runs: Runs,
    doc_chunk: int,
) -> Scan:
    """One pass over the table and ``products_docsize`` in rowid order, a chunk of rows at a time; each chunk's
    pairs and positions become one run, and its column sizes are checked against SQLite's."""
    n_cols = len(columns)
    indexed = list(range(1, n_cols))
    n_terms = int(ascii_terms.size)
    docs_per_term = np.zeros(n_terms, dtype=np.int64)
    cnt_per_term = np.zeros(n_terms, dtype=np.int64)
    column_totals = np.zeros(n_cols, dtype=np.int64)
    freq_values = np.zeros(0, dtype=np.float64)
    rowid_chunks: list[np.ndarray] = []
    length_chunks: list[np.ndarray] = []
    pair_bounds: list[np.ndarray] = []
    position_bounds: list[np.ndarray] = []
    table = connection.execute(f"SELECT rowid, {', '.join(columns[c] for c in indexed)} FROM products ORDER BY rowid")
    docsize = connection.execute("SELECT id, sz FROM products_docsize ORDER BY id")
    first_doc = 0
    while True:
        rows = table.fetchmany(doc_chunk)
        sizes_rows = docsize.fetchmany(len(rows)) if rows else docsize.fetchmany(1)
        if [rowid for rowid, *_ in rows] != [rowid for rowid, _ in sizes_rows]:
            raise PostingsUnavailable("products_docsize rows differ from the table's rows")
        if not rows:
            break
        n = len(rows)
        rowid_chunks.append(np.fromiter((row[0] for row in rows), dtype=np.int64, count=n))
        sizes = np.zeros((n, n_cols), dtype=np.int64)
        column_ids: list[np.ndarray] = []
        for position, col in enumerate(indexed, start=1):
            ids_col, sizes[:, col] = lookup.column([str(row[position] or "") for row in rows])
            column_ids.append(ids_col)
        del rows
        _check_sizes(sizes, [sz for _, sz in sizes_rows])
        column_totals += sizes.sum(axis=0)
        length_chunks.append(sizes.sum(axis=1))
        pair_term, term_counts, freq, run = _chunk_run(column_ids, sizes, indexed, first_doc, weights, ascii_terms)
        docs_per_term += np.bincount(pair_term, minlength=n_terms)[:n_terms]
        cnt_per_term += term_counts
        freq_values = np.union1d(freq_values, freq)
        runs.add(*run)
        pair_bounds.append(np.searchsorted(pair_term, edges))
        position_bounds.append(np.searchsorted(run[3], edges))
        first_doc += n
    if not first_doc:
        raise PostingsUnavailable("the FTS table is empty")
    averages = connection.execute("SELECT block FROM products_data WHERE id = 1").fetchone()
    totals = varints(averages[0]) if averages else []
    if len(totals) < 1 + n_cols or totals[0] != first_doc or totals[1 : 1 + n_cols] != column_totals.tolist():
        raise PostingsUnavailable("the FTS5 averages record differs from the stored rows")
    return Scan(
        rowids=np.concatenate(rowid_chunks), doc_lengths=np.concatenate(length_chunks),
        total_tokens=int(sum(totals[1 : 1 + n_cols])), docs_per_term=docs_per_term, cnt_per_term=cnt_per_term,
        freq_values=freq_values, pair_bounds=pair_bounds, position_bounds=position_bounds,
    )


def _chunk_run(
    column_ids: list[np.ndarray],
    sizes: np.ndarray,
    indexed: list[int],
    first_doc: int,
    weights: np.ndarray,
    ascii_terms: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """One chunk's (pair terms, instances per term, pair frequencies, run): the run is its (term, row, frequency)
    pairs and ASCII (term, position key) entries, sorted by term. ``column_ids`` (per indexed column, the term ids
    in row/offset order) is emptied once interleaved, so its arrays are freed as early as in one function."""
    n, n_cols = sizes.shape
    n_terms = int(ascii_terms.size)
    # Instances in (row, column, offset) order, then stably by term: (term, row, column, offset).
    flat_sizes = sizes.reshape(-1)
    inst_term = row_major(column_ids, sizes, indexed)
    column_ids.clear()
    order = np.argsort(inst_term, kind="stable")
    inst_term = inst_term[order]
    inst_doc = np.repeat(np.repeat(np.arange(first_doc, first_doc + n, dtype=np.int32), n_cols), flat_sizes)[order]
    inst_col = np.repeat(np.tile(np.arange(n_cols, dtype=np.int8), n), flat_sizes)[order]
    starts = np.repeat(np.cumsum(flat_sizes) - flat_sizes, flat_sizes)
    inst_off = (np.arange(inst_term.size, dtype=np.int64) - starts)[order]
    del order, starts

    new_pair = np.ones(inst_term.size, dtype=bool)
    new_pair[1:] = (inst_term[1:] != inst_term[:-1]) | (inst_doc[1:] != inst_doc[:-1])
    pair_start = np.flatnonzero(new_pair)
    del new_pair
    pair_len = np.diff(np.append(pair_start, inst_term.size))
    pair_term = inst_term[pair_start]
    inst_weight = weights[inst_col]
    freq = 0.0 + inst_weight[pair_start]  # the first instance; then one at a time, as xInst adds them
    repeated = np.flatnonzero(pair_len > 1)
    for step in range(1, int(pair_len.max(initial=1))):
        repeated = repeated[pair_len[repeated] > step]
        freq[repeated] += inst_weight[pair_start[repeated] + step]
    del inst_weight, repeated, pair_len
    term_counts = np.bincount(inst_term, minlength=n_terms)[:n_terms]

    # Positions only for ASCII terms: only they can form multi-token phrases (``usb-c`` = ``usb`` ``c``).
    keep = ascii_terms[inst_term]
    position_term = inst_term[keep]
    position_keys = (
        (inst_doc[keep].astype(np.int64) << _KEY_DOC_SHIFT)
        | (inst_col[keep].astype(np.int64) << _KEY_COL_SHIFT)
        | inst_off[keep]
    )
    pair_docs = inst_doc[pair_start]
    del inst_term, inst_doc, inst_col, inst_off, keep, pair_start
    return pair_term, term_counts, freq, (pair_term, pair_docs, freq, position_term, position_keys)


def _check_sizes(sizes: np.ndarray, stored: list[bytes]) -> None:
    """SQLite's per-row column sizes (``products_docsize``) must equal what we counted."""
    n_docs, n_cols = sizes.shape
    blob = b"".join(stored)
    if len(blob) == n_docs * n_cols and max(blob, default=0) < 0x80:  # every size one varint byte
        same = np.array_equal(np.frombuffer(blob, dtype=np.uint8).reshape(n_docs, n_cols), sizes)
    else:
        same = all(varints(sz) == sizes[doc].tolist() for doc, sz in enumerate(stored))
    if not same:
        raise PostingsUnavailable("per-row column sizes differ from products_docsize")


def varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (7 bits a byte, high bit = more, the 9th byte whole), as FTS5 stores sizes."""
    if max(blob, default=0) < 0x80:
        return list(blob)
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        out.append(value)
    return out


class TermLookup:
    """Term ids of stored column text, vectorised: a token of up to three characters is looked up by its code
    points packed into one int64 (21 bits each), a longer one in a dict; a token that is no term is refused."""

    def __init__(self, term_ids: dict[str, int]) -> None:
        short = {_pack(term): i for term, i in term_ids.items() if len(term) <= 3}
        self._keys = np.fromiter(sorted(short), dtype=np.int64, count=len(short))
        self._ids = np.fromiter((short[key] for key in self._keys.tolist()), dtype=np.int32, count=len(short))
        self._long = {term: i for term, i in term_ids.items() if len(term) > 3}

    def column(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(term ids in row/offset order, tokens per row) of one column's texts."""
        text = " ".join(texts)
        try:
            points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        except UnicodeEncodeError as exc:
            raise PostingsUnavailable(f"stored text is not encodable: {exc}") from exc
        is_token = ~SEPARATOR_TABLE[np.minimum(points, 128)]
        edges = np.diff(np.concatenate(([False], is_token, [False])).astype(np.int8))
        begins = np.flatnonzero(edges == 1)
        lengths = np.flatnonzero(edges == -1) - begins
        padded = np.concatenate((points, [0, 0]))
        keys = padded[begins] << 42
        keys |= np.where(lengths > 1, padded[begins + 1], 0) << 21
        keys |= np.where(lengths > 2, padded[begins + 2], 0)
        where = np.minimum(np.searchsorted(self._keys, keys), max(self._keys.size - 1, 0))
        found = (lengths <= 3) & (self._keys[where] == keys) if self._keys.size else np.zeros(keys.size, dtype=bool)
        ids = np.where(found, self._ids[where] if self._ids.size else 0, -1).astype(np.int32)
        for i in np.flatnonzero(~found).tolist():
            token = text[begins[i] : begins[i] + lengths[i]]
            if token not in self._long:
                raise PostingsUnavailable(f"stored token {token!r} is not an FTS5 term as unicode61 split it")
            ids[i] = self._long[token]
        row_of_char = np.zeros(points.size + 1, dtype=np.int32)
        row_of_char[np.cumsum([len(t) + 1 for t in texts[:-1]], dtype=np.int64)] = 1
        rows = np.cumsum(row_of_char, dtype=np.int32)[begins]
        return ids, np.bincount(rows, minlength=len(texts))


def _pack(term: str) -> int:
    key = 0
    for shift, ch in zip((42, 21, 0), term, strict=False):
        key |= ord(ch) << shift
    return key


def row_major(column_ids: list[np.ndarray], sizes: np.ndarray, indexed: list[int]) -> np.ndarray:
    """Interleave per-column term ids into (row, column, offset) order."""
    n_docs, n_cols = sizes.shape
    flat_sizes = sizes.reshape(-1)
    out = np.empty(int(flat_sizes.sum()), dtype=np.int32)
    starts = np.cumsum(flat_sizes) - flat_sizes  # where each (row, column) run begins in row-major order
    for col, ids in zip(indexed, column_ids, strict=True):
        lengths = sizes[:, col]
        within = np.arange(ids.size, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[np.repeat(starts.reshape(n_docs, n_cols)[:, col], lengths) + within] = ids
    return out
