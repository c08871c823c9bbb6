"""``SearchIndex``: a checked, read-only FTS5 index and its cached queries (docs/contract.md#search-ranking, #search-runtime, #search-index-manifest).

Ranking is SQLite's own ``bm25()`` over the frozen column order and weights, with the ASIN as tie-break,
so results equal the reference's for the same catalog. Once built the index is read-only, which makes an
exact LRU cache over the query tokens safe and lets one ``SearchIndex`` serve every session and thread of a
process through a small pool of read-only connections (``_pool``). This cache is the only one a search
passes: the environment's search goes through it too.

Speed: reading ``asin`` makes FTS5 fetch the whole content row of every matching product before sorting,
which is most of the contract query's cost. Our builder therefore inserts products in ASIN order, so that
rowid order *is* ASIN order; such an index is queried by ``ORDER BY score, rowid`` with the ASINs looked up
in memory afterwards, which gives exactly the contract's results. Any other index (e.g. one built by the
reference) is queried with the contract SQL itself.

Faster still: when opened, the index ranks with its postings in numpy arrays (``_postings.Postings``, rebuilt
from SQLite or memory-mapped from what ``prepare`` stored) once they pass the check in ``_backend``.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import versions
from ..bounded_cache import SEARCH_RESULT_BYTES, BoundedMemo, CacheInfo
from ..errors import DataError
from ._backend import (
    FORCED_SQLITE,
    Backend,
    RankingQuery,
    built_into_files,
    rebuilt_postings,
    stored_postings,
    wants_postings,
)
from ._manifest import manifest_problems, manifest_row, read_table, table_definition_problems
from ._pool import ConnectionPool
from ._postings import Postings
from ._ranking import Ranking, SearchHit, entry_bytes
from ._schema import bm25_call, match_expression, rebuild_hint
from .stored import AsinColumn, NpyFileSink, load_asin_column
from .text import search_tokens

#: Cached rankings (one per distinct token tuple and k); on the default catalog at k = 150 about 12 KB each, about
#: twice that once ``search`` has made the entry's hits. The bytes bound (``cache_bytes``) is the one that holds
#: against a client choosing long queries: each entry is charged its key's tokens too.
DEFAULT_CACHE_SIZE = 4096


def _refusal(file: Path, problems: list[str]) -> DataError:
    return DataError(f"search index {file} refused: " + "; ".join(problems) + f"; {rebuild_hint(file)}", code="search_unavailable")


class SearchIndex:
    """A validated read-only index; ``search`` is exact-cached and safe to call from many threads at once."""

    def __init__(
        self,
        path: Path,
        manifest: Mapping[str, Any],
        asin_of_rowid: Mapping[int, str],
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        accelerate: bool | None = None,
        pool: ConnectionPool | None = None,
        cache_bytes: int = SEARCH_RESULT_BYTES,
    ) -> None:
        """Wrap an already checked index (use ``open`` or ``open_stored``, which run the docs/contract.md#search-index-manifest checks).

        Args:
            path: the index file.
            manifest: its manifest row.
            asin_of_rowid: rowid → ASIN for every row.
            cache_size: most cached result lists (LRU).
            accelerate: rank with verified in-memory postings (default: unless ``SHOPSIMRL_SEARCH_BACKEND=sqlite``).
            pool: read-only connections to ``path`` (one idle connection is reused for the postings check).
            cache_bytes: most bytes the cached result lists and their keys hold (LRU).
        """
        self.path = path
        self.manifest: dict[str, Any] = dict(manifest)
        bm25 = bm25_call(manifest["field_weights"])
        #: The reference's query, verbatim (docs/contract.md#search-ranking).
        self.contract_sql = (
            f"SELECT asin, {bm25} AS score FROM products WHERE products MATCH ? ORDER BY score ASC, asin ASC LIMIT ?"
        )
        if isinstance(asin_of_rowid, AsinColumn):
            #: True when rowid order is ASIN order, so the cheaper rowid query gives the same ranking.
            self.rowid_is_asin_order = asin_of_rowid.is_ascending()
            self._asin_of_rowid: Mapping[int, str] = asin_of_rowid
        else:
            ordered = [asin_of_rowid[rowid] for rowid in sorted(asin_of_rowid)]
            self.rowid_is_asin_order = all(a < b for a, b in itertools.pairwise(ordered))
            self._asin_of_rowid = dict(asin_of_rowid)
        self._sql = (
            f"SELECT rowid, {bm25} AS score FROM products WHERE products MATCH ? ORDER BY score ASC, rowid ASC LIMIT ?"
            if self.rowid_is_asin_order
            else self.contract_sql
        )
        self._pool = ConnectionPool(path) if pool is None else pool
        self._cached = BoundedMemo(self._run, maxsize=cache_size, max_bytes=cache_bytes, size_of=entry_bytes)
        backend = FORCED_SQLITE
        if wants_postings(accelerate):
            with self._pool.connection() as connection:
                backend = rebuilt_postings(path, connection, self.manifest, self._ranking_query())
        self._use(backend)

    def _ranking_query(self) -> RankingQuery:
        return RankingQuery(self._sql, self._asin_of_rowid, self.rowid_is_asin_order)

    def _use(self, backend: Backend) -> None:
        #: The exact in-memory ranking, or None when this index ranks with SQLite (see ``backend_reason``).
        self.postings: Postings | None = backend.postings
        self.backend = backend.name
        self.backend_reason = backend.reason
        self.postings_load_s = backend.load_s

    def store_postings(self, sink: NpyFileSink) -> Postings | None:
        """Build this index's postings into ``.npy`` files through ``sink`` (what ``prepare`` stores) and rank with
        them once verified; None (and no files) when they cannot be verified, the index then ranks with SQLite."""
        with self._pool.connection() as connection:
            self._use(built_into_files(self.path, sink, connection, self.manifest, self._ranking_query()))
        return self.postings

    @property
    def asin_of_rowid(self) -> Mapping[int, str]:
        """rowid → ASIN of every row (read-only; ``prepare`` stores it for opening)."""
        return self._asin_of_rowid

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        expected_product_sha256: str | None = None,
        expected_field_weights: Mapping[str, float] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        accelerate: bool | None = None,
        cache_bytes: int = SEARCH_RESULT_BYTES,
    ) -> SearchIndex:
        """Open ``path`` read-only after the docs/contract.md#search-index-manifest checks.

        Args:
            path: the index file (``products.sqlite3``).
            expected_product_sha256: the product data's SHA-256 the manifest must record (None: not checked).
            expected_field_weights: the field weights the manifest must record (None: any valid ones).
            cache_size: most cached result lists (LRU).
            accelerate: load the exact in-memory ranking (default: unless ``SHOPSIMRL_SEARCH_BACKEND=sqlite``).
            cache_bytes: most bytes the cached result lists and their keys hold.

        Returns:
            The open index; one read-only connection serves the checks, the postings check and later queries.

        Raises:
            DataError: the file is missing, unreadable, or fails a check (all problems are listed).
        """
        file = Path(path)
        if not file.is_file():
            raise DataError(
                f"ShopSimulator search index not found: {file}. Build it with "
                f"`shopsimrl data prepare --archive ARCHIVE --out {file.parent}` (add --force to replace a data dir).", code="search_unavailable"
            )
        try:
            pool = ConnectionPool(file)
            connection = pool.acquire()
        except (sqlite3.Error, OSError) as exc:
            raise DataError(f"invalid ShopSimulator search index manifest: {file}: {exc}; {rebuild_hint(file)}", code="search_unavailable") from exc
        try:
            try:
                manifest = manifest_row(connection)
            except (sqlite3.Error, TypeError, ValueError) as exc:
                raise DataError(
                    f"invalid ShopSimulator search index manifest: {file}: {exc}; {rebuild_hint(file)}", code="search_unavailable"
                ) from exc
            problems = manifest_problems(manifest, expected_product_sha256, expected_field_weights)
            asins: dict[int, str] = {}
            if not problems:
                try:
                    problems, asins = read_table(connection, manifest)
                except sqlite3.Error as exc:
                    problems = [f"unreadable FTS table: {exc}"]
            if problems:
                raise _refusal(file, problems)
            connection.execute("PRAGMA shrink_memory")  # the table scan filled its page cache; it stays in the pool
        except BaseException:
            connection.close()
            pool.close()
            raise
        pool.release(connection)
        return cls(file, manifest, asins, cache_size=cache_size, accelerate=accelerate, pool=pool,
                   cache_bytes=cache_bytes)

    @classmethod
    def open_stored(
        cls,
        path: str | os.PathLike[str],
        stored_dir: str | os.PathLike[str],
        stored_meta: Mapping[str, Any],
        *,
        expected_product_sha256: str | None = None,
        expected_field_weights: Mapping[str, float] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        accelerate: bool | None = None,
        cache_bytes: int = SEARCH_RESULT_BYTES,
    ) -> SearchIndex:
        """Open ``path`` with the rowid → ASIN map and postings that ``prepare`` stored in ``stored_dir``.

        The caller has checked the stored files' SHA-256 against the data-directory manifest; here the SQLite
        manifest and table definition are checked as in ``open`` (not every row), and the memory-mapped postings
        must rank a sample of title queries byte-identically to SQLite, or the index ranks with SQLite.

        Args:
            path: the index file.
            stored_dir: the folder ``prepare`` stored the search arrays in.
            stored_meta: their meta, from the data-directory manifest.
            expected_product_sha256, expected_field_weights, cache_size, accelerate, cache_bytes: as for ``open``.

        Returns:
            The open index.

        Raises:
            DataError: the file is missing, fails a check, or the stored arrays do not match it.
        """
        file = Path(path)
        directory = Path(stored_dir)
        if not file.is_file():
            raise DataError(f"ShopSimulator search index not found: {file}; {rebuild_hint(file)}", code="search_unavailable")
        pool: ConnectionPool | None = None
        try:
            pool = ConnectionPool(file)
            with pool.connection() as connection:
                manifest = manifest_row(connection)
                problems = manifest_problems(manifest, expected_product_sha256, expected_field_weights)
                if not problems:
                    problems = table_definition_problems(connection)
                asins = load_asin_column(directory)
                if not problems and len(asins) != manifest.get("product_count"):
                    problems.append(f"stored ASINs ({len(asins)}) differ from the index's product count")
                if problems:
                    raise _refusal(file, problems)
                index = cls(file, manifest, asins, cache_size=cache_size, accelerate=False, pool=pool,
                            cache_bytes=cache_bytes)
                if wants_postings(accelerate):
                    index._use(stored_postings(file, directory, stored_meta, connection, index._ranking_query()))
        except (sqlite3.Error, ValueError, OSError, KeyError) as exc:
            if pool is not None:
                pool.close()
            if isinstance(exc, DataError) and exc.code == "search_unavailable":
                raise  # a refusal that already names its problems
            raise DataError(f"search index {file} refused: {exc}; {rebuild_hint(file)}", code="search_unavailable") from exc
        except BaseException:
            if pool is not None:
                pool.close()
            raise
        return index

    # -- queries ---------------------------------------------------------------------------------------------

    def raw_fts_query(self, tokens: tuple[str, ...], k: int, *, contract_sql: bool = False) -> list[tuple[Any, float]]:
        """The bare SQLite query for already-tokenised text: (rowid or asin, bm25) rows (the benchmark baseline).

        ``contract_sql=True`` runs the reference's query verbatim, whose rows are (asin, bm25).
        """
        with self._pool.connection() as connection:
            sql = self.contract_sql if contract_sql else self._sql
            rows: list[tuple[Any, float]] = connection.execute(sql, (match_expression(tokens), k)).fetchall()
            return rows

    def _run(self, tokens: tuple[str, ...], k: int) -> Ranking:
        postings = self.postings
        if postings is not None:
            self._pool.check_open()
            self._pool.check_same_file()
            ranked = postings.rank(tokens, k)
            if ranked is not None:
                rowids = [rowid for rowid, _ in ranked]
                asin_of = self._asin_of_rowid
                asins = asin_of.many(rowids) if isinstance(asin_of, AsinColumn) else [asin_of[r] for r in rowids]
                return Ranking(tuple(asins), array("d", [score for _, score in ranked]))
        rows = self.raw_fts_query(tokens, k)
        if self.rowid_is_asin_order:
            asin_of = self._asin_of_rowid
            return Ranking(tuple(asin_of[rowid] for rowid, _ in rows), array("d", [-score for _, score in rows]))
        return Ranking(tuple(asin for asin, _ in rows), array("d", [-score for _, score in rows]))

    def search_tokens(self, tokens: tuple[str, ...], k: int = versions.SEARCH_TOP_K) -> tuple[SearchHit, ...]:
        """Ranked hits for already-tokenised text (cached; the tuple is shared, so it is immutable).

        Args:
            tokens: query tokens as ``search.search_tokens`` makes them; their order is part of the query.
            k: most hits.

        Returns:
            Up to ``k`` hits by -bm25, ties by ASIN ascending; ``()`` for no tokens or ``k <= 0``.

        Raises:
            DataError: the index is closed, or its file was replaced or removed.
        """
        if not tokens or k <= 0:
            return ()
        self._pool.check_open()
        return self._cached(tuple(tokens), k).hits()

    def result_asins(self, tokens: tuple[str, ...], k: int = versions.SEARCH_TOP_K) -> tuple[str, ...]:
        """The ASINs of ``search_tokens(tokens, k)`` in rank order, from the same cache entry.

        Why: a session keeps only the ASINs of its results; every session that searched the same tokens then
        holds the one cached tuple instead of a copy of its own.

        Args:
            tokens: query tokens as ``search.search_tokens`` makes them.
            k: most hits.

        Returns:
            Up to ``k`` ASINs (a shared, immutable tuple); ``()`` for no tokens or ``k <= 0``.

        Raises:
            DataError: the index is closed, or its file was replaced or removed.
        """
        if not tokens or k <= 0:
            return ()
        self._pool.check_open()
        return self._cached(tuple(tokens), k).asins

    def search(self, query: str, k: int = versions.SEARCH_TOP_K) -> list[SearchHit]:
        """The top-``k`` hits of ``query`` (normalised and tokenised first; cached by its tokens).

        Args:
            query: free text as an agent types it.
            k: most hits.

        Returns:
            A new list of up to ``k`` hits by -bm25, ties by ASIN ascending; ``[]`` for no tokens or ``k <= 0``.

        Raises:
            DataError: the index is closed, or its file was replaced or removed.
        """
        return list(self.search_tokens(search_tokens(query), k))

    def search_uncached(self, query: str, k: int = versions.SEARCH_TOP_K) -> list[SearchHit]:
        """``search`` without the cache (same results; for benchmarks and checks)."""
        tokens = search_tokens(query)
        if not tokens or k <= 0:
            return []
        return list(self._run(tokens, k).hits())

    def cache_info(self) -> CacheInfo:
        """Hits, misses, bounds and size of the result cache (``functools.lru_cache``'s fields, and bytes)."""
        return self._cached.cache_info()

    def close(self) -> None:
        """Close the connections (one in use closes when its query ends); later searches raise ``DataError`` (``search_unavailable``)."""
        self._pool.close()
        self._cached.cache_clear()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
