"""The SQLite FTS5 multi-field BM25 index (env_spec §3.4–3.6): atomic build, checked open, cached search.

Ranking is SQLite's own ``bm25()`` over the frozen column order and weights, with the ASIN as tie-break,
so results equal the reference's for the same catalog. Once built the index is read-only, which makes an
exact LRU cache over the query tokens safe and lets one ``SearchIndex`` serve every session and thread of a
process through a small pool of read-only connections (a connection is used by one thread at a time).

Speed: reading ``asin`` makes FTS5 fetch the whole content row of every matching product before sorting,
which is most of the contract query's cost. Our builder therefore inserts products in ASIN order, so that
rowid order *is* ASIN order; such an index is queried by ``ORDER BY score, rowid`` with the ASINs looked up
in memory afterwards, which gives exactly the contract's results. Any other index (e.g. one built by the
reference) is queried with the contract SQL itself.

Faster still: when opened, the index loads its postings into numpy arrays (``postings.Postings``, checked
against SQLite's own statistics) and ranks with FTS5's bm25 arithmetic computed over them, exactly; a sample
of title queries must then give byte-identical results on both paths, or the index stays on SQLite (logged).
``SHOPSIMRL_SEARCH_BACKEND=sqlite`` or ``accelerate=False`` forces SQLite.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import platform
import random
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import versions
from ..errors import SearchIndexError
from .documents import FIELDS, product_search_fields
from .postings import Postings, PostingsUnavailable
from .stored import AsinColumn, load_asin_column, load_postings
from .text import search_tokens

logger = logging.getLogger("shopsimrl.search")

FTS_COLUMNS: tuple[str, ...] = ("asin", *FIELDS)
#: The contract's field weights (§3.4), read-only.
DEFAULT_FIELD_WEIGHTS: Mapping[str, float] = MappingProxyType({
    "title": 3.0, "brand": 2.0, "category": 2.0, "model": 2.5, "attributes": 1.5, "options": 1.2, "bullets": 0.8,
})
TOKENIZE = "unicode61 remove_diacritics 2"
CREATE_PRODUCTS_SQL = (
    "CREATE VIRTUAL TABLE products USING fts5("
    "asin UNINDEXED, title, brand, category, model, attributes, options, bullets, "
    f"tokenize='{TOKENIZE}')"
)
#: Cached result lists (one per distinct token tuple and k); about 13 KB each at k = 150.
DEFAULT_CACHE_SIZE = 4096
_MMAP_BYTES = 1 << 30
#: ``sqlite`` forces the SQLite ranking path; anything else (or unset) tries the exact in-memory one.
BACKEND_ENV = "SHOPSIMRL_SEARCH_BACKEND"
#: Title queries compared between the two paths when an index is built from SQLite (and by ``prepare``).
VERIFY_QUERIES = 30
#: Title queries compared when stored postings are opened (``prepare`` already compared VERIFY_QUERIES).
STORED_VERIFY_QUERIES = 5


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked result: 1-based ``rank``, ``asin`` and ``score`` = -bm25 (higher is better)."""

    rank: int
    asin: str
    score: float


def rebuild_hint(path: Path) -> str:
    return f"rebuild it with `shopsimrl data prepare --archive ARCHIVE --out {path.parent} --force`"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _weights_are_valid(field_weights: object) -> bool:
    """Exactly the 7 fields, each a finite positive number (§3.6)."""
    return (
        isinstance(field_weights, Mapping)
        and set(field_weights) == set(FIELDS)
        and all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
            for w in field_weights.values()
        )
    )


def bm25_column_weights(field_weights: Mapping[str, float]) -> dict[str, float]:
    """Positional ``bm25()`` weights keyed by column, the UNINDEXED asin first with weight 0."""
    return {"asin": 0.0, **{name: float(field_weights[name]) for name in FIELDS}}


def match_expression(tokens: Iterable[str]) -> str:
    """The FTS5 query: every token as a quoted phrase, joined by OR (quotes doubled, as FTS5 escapes them)."""
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)


_STAGE_COLUMNS = ", ".join(FIELDS)


def _stage_rows(products: Iterable[Mapping[str, Any]], connection: sqlite3.Connection) -> int:
    """Put one row per usable ASIN into the staging table (empty, ``nan`` and repeated ASINs skipped, the first
    one wins); returns the row count. The table is keyed by ASIN, so it reads back in ASIN order from disk and
    a million products never have to be held and sorted in memory."""
    connection.execute(f"CREATE TABLE stage(asin TEXT PRIMARY KEY, {_STAGE_COLUMNS}) WITHOUT ROWID")
    connection.execute("BEGIN")

    def rows() -> Iterable[tuple[str, ...]]:
        for product in products:
            raw = product.get("asin")
            asin = "" if raw is None else str(raw)
            if not asin.strip() or asin.strip().lower() == "nan":
                continue
            fields = product_search_fields(product)
            yield (asin, *(fields[name] for name in FIELDS))

    connection.executemany(f"INSERT OR IGNORE INTO stage VALUES ({', '.join('?' * (1 + len(FIELDS)))})", rows())
    connection.execute("COMMIT")
    return int(connection.execute("SELECT count(*) FROM stage").fetchone()[0])


def build_search_index(
    products: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    product_data_sha256: str,
    field_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Build the index at ``path`` atomically (``<path>.building``, then rename); returns manifest + ``index_sha256``.

    The same products, sha and weights give a byte-identical file with the same Python and SQLite versions.
    """
    source = DEFAULT_FIELD_WEIGHTS if field_weights is None else field_weights
    if not _weights_are_valid(source):
        raise ValueError(f"field_weights must give exactly {list(FIELDS)} finite positive weights: {field_weights!r}")
    weights = {name: float(source[name]) for name in FIELDS}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".building")
    temporary.unlink(missing_ok=True)
    staging = target.with_name(target.name + ".staging")
    staging.unlink(missing_ok=True)
    stage = sqlite3.connect(staging, isolation_level=None)
    try:
        stage.execute("PRAGMA journal_mode = OFF")
        stage.execute("PRAGMA synchronous = OFF")
        count = _stage_rows(products, stage)
    except BaseException:
        stage.close()
        staging.unlink(missing_ok=True)
        raise
    manifest: dict[str, Any] = {
        "search_version": versions.SEARCH_VERSION,
        "index_schema_version": versions.INDEX_SCHEMA_VERSION,
        "product_count": count,
        "product_data_sha256": product_data_sha256,
        "field_weights": weights,
        "fts_columns": list(FTS_COLUMNS),
        "bm25_column_weights": bm25_column_weights(weights),
        "option_document_version": versions.OPTION_DOCUMENT_VERSION,
        "query_normalizer": versions.QUERY_NORMALIZER_VERSION,
        "tokenizer": versions.TOKENIZER_VERSION,
        "tie_breaker": versions.TIE_BREAKER,
        "python_version": platform.python_version(),
        "sqlite_version": sqlite3.sqlite_version,
    }
    connection = sqlite3.connect(temporary, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = OFF")  # a crash leaves only the .building file
        connection.execute("PRAGMA synchronous = OFF")  # durability comes from the fsync before the rename
        connection.execute("BEGIN")
        connection.execute(CREATE_PRODUCTS_SQL)
        connection.execute("CREATE TABLE manifest(payload TEXT NOT NULL)")
        # rowid order = ASIN order (SQLite's BINARY order on UTF-8 = Python's str order)
        ordered = stage.execute(f"SELECT asin, {_STAGE_COLUMNS} FROM stage ORDER BY asin")
        connection.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ordered)
        connection.execute("INSERT INTO products(products) VALUES ('optimize')")  # one segment: faster queries
        connection.execute(
            "INSERT INTO manifest(payload) VALUES (?)", (json.dumps(manifest, sort_keys=True, ensure_ascii=False),)
        )
        connection.execute("COMMIT")
        connection.execute("VACUUM")
    except BaseException:
        connection.close()
        temporary.unlink(missing_ok=True)
        raise
    finally:
        stage.close()
        staging.unlink(missing_ok=True)
    connection.close()
    with open(temporary, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, target)
    return {**manifest, "index_sha256": _sha256_file(target)}


def _manifest_row(connection: sqlite3.Connection) -> dict[str, Any]:
    """The index's one manifest row as a JSON object (ValueError / sqlite3.Error otherwise)."""
    rows = connection.execute("SELECT payload FROM manifest").fetchall()
    if len(rows) != 1:
        raise ValueError(f"expected one manifest row, found {len(rows)}")
    manifest = json.loads(rows[0][0])
    if not isinstance(manifest, dict):
        raise ValueError("the manifest is not a JSON object")
    return manifest


def _read_only(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
    )
    connection.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
    connection.execute("PRAGMA query_only = 1")
    return connection


def _manifest_problems(
    manifest: Mapping[str, Any], expected_product_sha256: str | None, expected_field_weights: Mapping[str, float] | None
) -> list[str]:
    """Every §3.6 check (plus the normaliser, tokenizer and tie-break versions) that the manifest fails."""
    problems: list[str] = []
    if manifest.get("search_version") != versions.SEARCH_VERSION:
        problems.append(
            f"search version mismatch: index has {manifest.get('search_version')!r}, expected {versions.SEARCH_VERSION!r}"
        )
    if manifest.get("index_schema_version") != versions.INDEX_SCHEMA_VERSION:
        problems.append("index schema version mismatch")
    if manifest.get("fts_columns") != list(FTS_COLUMNS):
        problems.append("FTS column order mismatch")
    if manifest.get("option_document_version") != versions.OPTION_DOCUMENT_VERSION:
        problems.append("option document version mismatch")
    for key, expected in (
        ("query_normalizer", versions.QUERY_NORMALIZER_VERSION),
        ("tokenizer", versions.TOKENIZER_VERSION),
        ("tie_breaker", versions.TIE_BREAKER),
    ):
        if manifest.get(key) != expected:
            problems.append(f"{key} mismatch: index has {manifest.get(key)!r}, expected {expected!r}")
    if expected_product_sha256 is not None and manifest.get("product_data_sha256") != expected_product_sha256:
        problems.append("product data SHA-256 does not match the search index")
    weights = manifest.get("field_weights")
    if (
        not isinstance(weights, Mapping)
        or not _weights_are_valid(weights)
        or manifest.get("bm25_column_weights") != bm25_column_weights(weights)
        or (expected_field_weights is not None and dict(weights) != dict(expected_field_weights))
    ):
        problems.append("BM25 column weights mismatch")
    count = manifest.get("product_count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        problems.append(f"invalid product_count {count!r}")
    return problems


def _table_definition_problems(connection: sqlite3.Connection) -> list[str]:
    """Problems of the stored table's definition against the declared FTS5 table (cheap: schema only)."""
    row = connection.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'products'").fetchone()
    if row is None:
        return ["the products FTS5 table is missing"]
    problems: list[str] = []
    columns = tuple(info[1] for info in connection.execute("PRAGMA table_info(products)"))
    if columns != FTS_COLUMNS:
        problems.append(f"FTS column order mismatch: table has {list(columns)}")
    sql = re.sub(r"\s+", " ", str(row[0])).lower()
    if "using fts5" not in sql or TOKENIZE not in sql or not re.search(r"\basin unindexed\b", sql):
        problems.append(f"FTS table definition mismatch (expected fts5, asin UNINDEXED, tokenize '{TOKENIZE}')")
    return problems


def _read_table(connection: sqlite3.Connection, manifest: Mapping[str, Any]) -> tuple[list[str], dict[int, str]]:
    """Check that the stored table really is the declared FTS5 table; return the problems and rowid → ASIN."""
    problems = _table_definition_problems(connection)
    if problems:
        return problems, {}
    asins = dict(connection.execute("SELECT rowid, asin FROM products ORDER BY rowid"))
    if len(asins) != manifest.get("product_count"):
        problems.append(f"product count mismatch: table has {len(asins)}, manifest says {manifest.get('product_count')}")
    if len(set(asins.values())) != len(asins) or not all(isinstance(a, str) for a in asins.values()):
        problems.append("the table holds duplicate or non-text ASINs")
    return problems, asins


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
    ) -> None:
        self.path = path
        self.manifest: dict[str, Any] = dict(manifest)
        weights = bm25_column_weights(manifest["field_weights"])
        bm25 = f"bm25(products, {', '.join(repr(weights[c]) for c in FTS_COLUMNS)})"
        #: The reference's query, verbatim (§3.4).
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
        self._identity = _file_identity(path)
        self._pool: list[sqlite3.Connection] = []  # idle connections, guarded by _lock
        self._lock = threading.Lock()
        self._closed = False
        self._cached = lru_cache(maxsize=cache_size)(self._run)
        #: The exact in-memory ranking, or None when this index ranks with SQLite (see ``backend_reason``).
        self.postings: Postings | None = None
        self.backend = "sqlite"
        self.backend_reason = ""
        self.postings_load_s = 0.0
        if accelerate is None:
            accelerate = os.environ.get(BACKEND_ENV, "").strip().lower() != "sqlite"
        if accelerate:
            self._start_postings()
        else:
            self.backend_reason = f"forced ({BACKEND_ENV}=sqlite or accelerate=False)"

    def _start_postings(self) -> None:
        """Load the postings and check them against SQLite on sample queries; on any doubt stay on SQLite."""
        start = time.perf_counter()
        connection = sqlite3.connect(
            f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
        try:
            if _file_identity(self.path) != self._identity:
                raise PostingsUnavailable("the index file changed while opening")
            weights = bm25_column_weights(self.manifest["field_weights"])
            ordered = sorted(self._asin_of_rowid.items(), key=lambda item: item[1])
            tie_rank = {rowid: rank for rank, (rowid, _) in enumerate(ordered)}
            connection.execute("CREATE VIRTUAL TABLE temp.shopsimrl_vocab USING fts5vocab('main', 'products', 'row')")
            postings = Postings.load(connection, FTS_COLUMNS, [weights[c] for c in FTS_COLUMNS], tie_rank)
            problem = self._verify(postings, connection)
            if problem:
                raise PostingsUnavailable(problem)
        except (PostingsUnavailable, sqlite3.Error, MemoryError) as exc:
            self.backend_reason = str(exc)
            logger.warning("search index %s ranks with SQLite: %s", self.path, exc)
            return
        finally:
            connection.close()
        self.postings = postings
        self.backend = "postings"
        self.backend_reason = f"verified on {VERIFY_QUERIES} title queries"
        self.postings_load_s = time.perf_counter() - start

    def verification_queries(
        self, connection: sqlite3.Connection, count: int = VERIFY_QUERIES
    ) -> list[tuple[str, ...]]:
        """Deterministic token tuples from product titles (plus attribute/option words) for the open-time check."""
        column = self._asin_of_rowid
        rowids = column.rowids.tolist() if isinstance(column, AsinColumn) else sorted(column)
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

    def _verify(self, postings: Postings, connection: sqlite3.Connection, count: int = VERIFY_QUERIES) -> str:
        """'' when every sample query ranks byte-identically on both paths, else what differed."""
        for tokens in self.verification_queries(connection, count):
            ours = postings.rank(tokens, versions.SEARCH_TOP_K)
            if ours is None:
                continue
            rows = connection.execute(self._sql, (match_expression(tokens), versions.SEARCH_TOP_K)).fetchall()
            if not self.rowid_is_asin_order:
                ours = [(self._asin_of_rowid[rowid], score) for rowid, score in ours]
            theirs = [(key, -bm25) for key, bm25 in rows]
            if ours != theirs:
                return f"the in-memory ranking differs from SQLite's for the query {match_expression(tokens)!r}"
        return ""

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        expected_product_sha256: str | None = None,
        expected_field_weights: Mapping[str, float] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        accelerate: bool | None = None,
    ) -> SearchIndex:
        """Open ``path`` read-only after the §3.6 checks; any mismatch raises ``SearchIndexError``.

        ``accelerate`` (default: unless ``SHOPSIMRL_SEARCH_BACKEND=sqlite``) loads the exact in-memory ranking.
        """
        file = Path(path)
        if not file.is_file():
            raise SearchIndexError(
                f"ShopSimulator search index not found: {file}. Build it with "
                f"`shopsimrl data prepare --archive ARCHIVE --out {file.parent}` (add --force to replace a data dir)."
            )
        try:
            connection = _read_only(file)
        except sqlite3.Error as exc:
            raise SearchIndexError(f"invalid ShopSimulator search index manifest: {file}: {exc}; {rebuild_hint(file)}") from exc
        try:
            try:
                manifest = _manifest_row(connection)
            except (sqlite3.Error, TypeError, ValueError) as exc:
                raise SearchIndexError(
                    f"invalid ShopSimulator search index manifest: {file}: {exc}; {rebuild_hint(file)}"
                ) from exc
            problems = _manifest_problems(manifest, expected_product_sha256, expected_field_weights)
            asins: dict[int, str] = {}
            if not problems:
                try:
                    problems, asins = _read_table(connection, manifest)
                except sqlite3.Error as exc:
                    problems = [f"unreadable FTS table: {exc}"]
        finally:
            connection.close()
        if problems:
            raise SearchIndexError(f"search index {file} refused: " + "; ".join(problems) + f"; {rebuild_hint(file)}")
        return cls(file, manifest, asins, cache_size=cache_size, accelerate=accelerate)

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
    ) -> SearchIndex:
        """Open ``path`` with the rowid → ASIN map and postings that ``prepare`` stored in ``stored_dir``.

        The caller has checked the stored files' SHA-256 against the data-directory manifest; here the SQLite
        manifest and table definition are checked as in ``open`` (not every row), and the memory-mapped postings
        must rank a sample of title queries byte-identically to SQLite, or the index ranks with SQLite.
        """
        file = Path(path)
        directory = Path(stored_dir)
        if not file.is_file():
            raise SearchIndexError(f"ShopSimulator search index not found: {file}; {rebuild_hint(file)}")
        try:
            connection = _read_only(file)
            manifest = _manifest_row(connection)
            problems = _manifest_problems(manifest, expected_product_sha256, expected_field_weights)
            if not problems:
                problems = _table_definition_problems(connection)
            asins = load_asin_column(directory)
            if not problems and len(asins) != manifest.get("product_count"):
                problems.append(f"stored ASINs ({len(asins)}) differ from the index's product count")
            if problems:
                raise SearchIndexError(
                    f"search index {file} refused: " + "; ".join(problems) + f"; {rebuild_hint(file)}"
                )
            index = cls(file, manifest, asins, cache_size=cache_size, accelerate=False)
            if accelerate is None:
                accelerate = os.environ.get(BACKEND_ENV, "").strip().lower() != "sqlite"
            if accelerate:
                index._attach_stored_postings(directory, stored_meta, connection)
        except (sqlite3.Error, ValueError, OSError, KeyError) as exc:
            raise SearchIndexError(f"search index {file} refused: {exc}; {rebuild_hint(file)}") from exc
        finally:
            if "connection" in locals():
                connection.close()
        return index

    def _attach_stored_postings(self, directory: Path, meta: Mapping[str, Any], connection: sqlite3.Connection) -> None:
        start = time.perf_counter()
        postings = load_postings(directory, meta)
        if postings is None:
            self.backend_reason = "prepare kept this index on SQLite (its postings could not be verified)"
            return
        problem = self._verify(postings, connection, STORED_VERIFY_QUERIES)
        if problem:
            self.backend_reason = problem
            logger.warning("search index %s ranks with SQLite: %s", self.path, problem)
            return
        self.postings = postings
        self.backend = "postings"
        self.backend_reason = f"stored postings, verified on {STORED_VERIFY_QUERIES} title queries at open"
        self.postings_load_s = time.perf_counter() - start

    # -- connections ---------------------------------------------------------------------------------------

    def _acquire(self) -> sqlite3.Connection:
        """An idle connection, or a new one while more threads query at once than ever before."""
        with self._lock:
            if self._closed:
                raise SearchIndexError(f"search index {self.path} is closed")
            if self._pool:
                return self._pool.pop()
        self._check_same_file()
        return _read_only(self.path)

    def _check_same_file(self) -> None:
        """Refuse to answer from an index file that was replaced or removed after it was opened."""
        try:
            same_file = _file_identity(self.path) == self._identity
        except OSError:
            same_file = False
        if not same_file:
            raise SearchIndexError(
                f"search index {self.path} was replaced or removed after it was opened; open it again"
            )

    def _release(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._pool.append(connection)
                return
        connection.close()

    # -- queries ---------------------------------------------------------------------------------------------

    def raw_fts_query(self, tokens: tuple[str, ...], k: int, *, contract_sql: bool = False) -> list[tuple[Any, float]]:
        """The bare SQLite query for already-tokenised text: (rowid or asin, bm25) rows (the benchmark baseline).

        ``contract_sql=True`` runs the reference's query verbatim, whose rows are (asin, bm25).
        """
        connection = self._acquire()
        try:
            sql = self.contract_sql if contract_sql else self._sql
            return connection.execute(sql, (match_expression(tokens), k)).fetchall()
        finally:
            self._release(connection)

    def _run(self, tokens: tuple[str, ...], k: int) -> tuple[SearchHit, ...]:
        postings = self.postings
        if postings is not None:
            if self._closed:
                raise SearchIndexError(f"search index {self.path} is closed")
            self._check_same_file()
            ranked = postings.rank(tokens, k)
            if ranked is not None and isinstance(self._asin_of_rowid, AsinColumn):
                asins = self._asin_of_rowid.many([rowid for rowid, _ in ranked])
                return tuple(SearchHit(rank, asin, score) for rank, (asin, (_, score)) in
                             enumerate(zip(asins, ranked, strict=True), 1))
            if ranked is not None:
                asin_of = self._asin_of_rowid
                return tuple(SearchHit(rank, asin_of[rowid], score) for rank, (rowid, score) in enumerate(ranked, 1))
        rows = self.raw_fts_query(tokens, k)
        if self.rowid_is_asin_order:
            asin_of = self._asin_of_rowid
            return tuple(SearchHit(rank, asin_of[rowid], -score) for rank, (rowid, score) in enumerate(rows, start=1))
        return tuple(SearchHit(rank, asin, -score) for rank, (asin, score) in enumerate(rows, start=1))

    def search_tokens(self, tokens: tuple[str, ...], k: int = versions.SEARCH_TOP_K) -> tuple[SearchHit, ...]:
        """Ranked hits for already-tokenised text (cached; the tuple is shared, so it is immutable)."""
        if not tokens or k <= 0:
            return ()
        if self._closed:
            raise SearchIndexError(f"search index {self.path} is closed")
        return self._cached(tuple(tokens), k)

    def search(self, query: str, k: int = versions.SEARCH_TOP_K) -> list[SearchHit]:
        """The top-``k`` hits of ``query`` by -bm25, ties by ASIN ascending; no tokens or k <= 0 gives []."""
        return list(self.search_tokens(search_tokens(query), k))

    def search_uncached(self, query: str, k: int = versions.SEARCH_TOP_K) -> list[SearchHit]:
        """``search`` without the cache (same results; for benchmarks and checks)."""
        tokens = search_tokens(query)
        if not tokens or k <= 0:
            return []
        return list(self._run(tokens, k))

    def cache_info(self) -> Any:
        return self._cached.cache_info()

    def close(self) -> None:
        """Close the connections (one in use closes when its query ends); later searches raise ``SearchIndexError``."""
        with self._lock:
            self._closed = True
            idle, self._pool = self._pool, []
        for connection in idle:
            connection.close()
        self._cached.cache_clear()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _file_identity(path: Path) -> tuple[int, int, int, int]:
    """(device, inode, size, mtime): a rebuilt index (a new file renamed over this one) changes it."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns
