"""Choosing the ranking path: the exact in-memory postings, verified against SQLite, or SQLite itself.

Why verify: the postings emulate FTS5's bm25 arithmetic; before an index ranks with them, a deterministic
sample of title queries (plus attribute and option words) must rank byte-identically on both paths, or the
index stays on SQLite and says why (logged). ``SHOPSIMRL_SEARCH_BACKEND=sqlite`` or ``accelerate=False``
forces SQLite.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import versions
from ._pool import writable_temp_schema
from ._postings import Postings, PostingsUnavailable
from ._postings_build import build_postings, postings_in_memory
from ._schema import FTS_COLUMNS, bm25_column_weights, match_expression
from .stored import POSTINGS_ARRAYS, AsinColumn, NpyFileSink, load_array, load_postings

logger = logging.getLogger("shopsimrl.search")

#: ``sqlite`` forces the SQLite ranking path; anything else (or unset) tries the exact in-memory one.
BACKEND_ENV = "SHOPSIMRL_SEARCH_BACKEND"
#: Title queries compared between the two paths when an index is built from SQLite (and by ``prepare``).
VERIFY_QUERIES = 30
#: Title queries compared when stored postings are opened (``prepare`` already compared VERIFY_QUERIES).
STORED_VERIFY_QUERIES = 5


@dataclass(frozen=True, slots=True)
class Backend:
    """The ranking path an index uses: ``postings`` (None: SQLite), why, and the postings' load time."""

    postings: Postings | None
    reason: str
    load_s: float = 0.0

    @property
    def name(self) -> str:
        return "sqlite" if self.postings is None else "postings"


def wants_postings(accelerate: bool | None) -> bool:
    """``accelerate`` when given, else True unless ``SHOPSIMRL_SEARCH_BACKEND=sqlite``."""
    if accelerate is None:
        return os.environ.get(BACKEND_ENV, "").strip().lower() != "sqlite"
    return accelerate


FORCED_SQLITE = Backend(None, f"forced ({BACKEND_ENV}=sqlite or accelerate=False)")


@dataclass(frozen=True, slots=True)
class RankingQuery:
    """What the verification compares against: the SQL an index ranks with, and how its keys map to ASINs."""

    sql: str
    asin_of_rowid: Mapping[int, str]
    rowid_is_asin_order: bool


def verification_queries(
    connection: sqlite3.Connection, asin_of_rowid: Mapping[int, str], count: int = VERIFY_QUERIES
) -> list[tuple[str, ...]]:
    """Deterministic token tuples from product titles (plus attribute/option words) for the open-time check."""
    rowids = asin_of_rowid.rowids.tolist() if isinstance(asin_of_rowid, AsinColumn) else sorted(asin_of_rowid)
    rng = random.Random(20240521)
    picked = sorted(rng.sample(rowids, min(count, len(rowids))))
    texts = {
        rowid: (str(title or "").split(), str(other or "").split())
        for rowid, title, other in connection.execute(
            "SELECT rowid, title, attributes || ' ' || options || ' ' || model FROM products WHERE rowid IN "
            f"({', '.join('?' * len(picked))})",
            picked,
        )
    }
    queries = []
    for i, rowid in enumerate(picked):
        title, other = texts.get(rowid, ([], []))
        words = rng.sample(title, min(len(title), rng.randint(1, 6)))
        if other and i % 3 == 0:
            words.append(rng.choice(other))
        queries.append(tuple(dict.fromkeys(words)) or ("的",))
    return queries


def ranking_difference(
    postings: Postings, connection: sqlite3.Connection, query: RankingQuery, count: int = VERIFY_QUERIES
) -> str:
    """'' when every sample query ranks byte-identically on both paths, else what differed."""
    for tokens in verification_queries(connection, query.asin_of_rowid, count):
        ranked = postings.rank(tokens, versions.SEARCH_TOP_K)
        if ranked is None:
            continue
        rows = connection.execute(query.sql, (match_expression(tokens), versions.SEARCH_TOP_K)).fetchall()
        ours: list[tuple[Any, float]] = list(ranked)
        if not query.rowid_is_asin_order:
            ours = [(query.asin_of_rowid[rowid], score) for rowid, score in ranked]
        theirs = [(key, -bm25) for key, bm25 in rows]
        if ours != theirs:
            return f"the in-memory ranking differs from SQLite's for the query {match_expression(tokens)!r}"
    return ""


def _refused(path: Path, reason: str) -> Backend:
    logger.warning("search index %s ranks with SQLite: %s", path, reason)
    return Backend(None, reason)


@contextmanager
def _vocabulary(connection: sqlite3.Connection) -> Iterator[None]:
    """SQLite's term list with per-term row and instance counts as ``temp.shopsimrl_vocab``, for the builder."""
    with writable_temp_schema(connection):
        connection.execute("CREATE VIRTUAL TABLE temp.shopsimrl_vocab USING fts5vocab('main', 'products', 'row')")
    try:
        yield
    finally:
        with writable_temp_schema(connection):
            connection.execute("DROP TABLE temp.shopsimrl_vocab")


def _tie_rank(query: RankingQuery) -> dict[int, int]:
    """Each rowid's place in ASIN order (the contract's tie-break)."""
    ordered = sorted(query.asin_of_rowid.items(), key=lambda item: item[1])
    return {rowid: rank for rank, (rowid, _) in enumerate(ordered)}


def rebuilt_postings(
    path: Path, connection: sqlite3.Connection, manifest: Mapping[str, Any], query: RankingQuery
) -> Backend:
    """Rebuild the postings from the FTS table over ``connection`` and verify them; on any doubt, SQLite."""
    start = time.perf_counter()
    try:
        weights = bm25_column_weights(manifest["field_weights"])
        tie_rank = _tie_rank(query)
        with _vocabulary(connection):
            postings = postings_in_memory(connection, FTS_COLUMNS, [weights[c] for c in FTS_COLUMNS], tie_rank)
        problem = ranking_difference(postings, connection, query)
    except (PostingsUnavailable, sqlite3.Error, MemoryError) as exc:
        return _refused(path, str(exc))
    if problem:
        return _refused(path, problem)
    return Backend(postings, f"verified on {VERIFY_QUERIES} title queries", time.perf_counter() - start)


def built_into_files(
    path: Path, sink: NpyFileSink, connection: sqlite3.Connection, manifest: Mapping[str, Any], query: RankingQuery
) -> Backend:
    """Build the postings straight into ``.npy`` files through ``sink`` (``prepare``'s stored form, a chunk of rows
    at a time with the runs spilled next to them), memory-map them and verify them like rebuilt ones; on any
    doubt the files are removed and the index ranks with SQLite."""
    start = time.perf_counter()
    try:
        weights = bm25_column_weights(manifest["field_weights"])
        column_weights = [weights[c] for c in FTS_COLUMNS]
        tie_rank = _tie_rank(query)
        with _vocabulary(connection):
            built = build_postings(connection, FTS_COLUMNS, column_weights, tie_rank, sink, spill_dir=sink.directory)
        del tie_rank
        arrays = {name: load_array(sink.path(name)) for name in POSTINGS_ARRAYS}
        postings = Postings.from_arrays(arrays, built.terms, built.total_tokens, column_weights)
        problem = ranking_difference(postings, connection, query)
    except (PostingsUnavailable, sqlite3.Error, MemoryError) as exc:
        sink.abort()
        return _refused(path, str(exc))
    except BaseException:
        sink.abort()
        raise
    if problem:
        sink.abort()
        return _refused(path, problem)
    return Backend(postings, f"stored, verified on {VERIFY_QUERIES} title queries", time.perf_counter() - start)


def stored_postings(
    path: Path, directory: Path, meta: Mapping[str, Any], connection: sqlite3.Connection, query: RankingQuery
) -> Backend:
    """The postings ``prepare`` stored in ``directory``, memory-mapped and verified on a few queries.

    Raises:
        ValueError, OSError, KeyError: the stored files do not match their meta or cannot be read.
    """
    start = time.perf_counter()
    postings = load_postings(directory, meta)
    if postings is None:
        return Backend(None, "prepare kept this index on SQLite (its postings could not be verified)")
    problem = ranking_difference(postings, connection, query, STORED_VERIFY_QUERIES)
    if problem:
        return _refused(path, problem)
    return Backend(
        postings, f"stored postings, verified on {STORED_VERIFY_QUERIES} title queries at open",
        time.perf_counter() - start,
    )
