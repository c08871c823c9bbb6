"""The SQLite FTS5 multi-field BM25 index (env_spec §3.4–3.6): atomic build, checked open, cached search.

The index is read-only once built, so an exact LRU cache over the query tokens is safe; each thread gets
its own read-only connection, so one ``SearchIndex`` can be shared by every session of a process.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import versions
from ..errors import SearchIndexError
from .documents import FIELDS, product_search_fields
from .text import search_tokens

FTS_COLUMNS = ("asin", *FIELDS)
DEFAULT_FIELD_WEIGHTS: dict[str, float] = {
    "title": 3.0, "brand": 2.0, "category": 2.0, "model": 2.5, "attributes": 1.5, "options": 1.2, "bullets": 0.8,
}
CACHE_SIZE = 16384
REBUILD_HINT = "rebuild it with `shopsimrl data prepare --archive ARCHIVE --out DIR --force`"


@dataclass(frozen=True, slots=True)
class SearchHit:
    rank: int
    asin: str
    score: float


def _sha256_file(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bm25_weights(field_weights: Mapping[str, float]) -> dict[str, float]:
    return {"asin": 0.0, **{name: float(field_weights[name]) for name in FIELDS}}


def _check_weights(field_weights: Mapping[str, Any]) -> None:
    if set(field_weights) != set(FIELDS) or not all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
        for w in field_weights.values()
    ):
        raise SearchIndexError("BM25 column weights mismatch")


def build_search_index(
    products: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    product_data_sha256: str,
    field_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Build the index at ``path`` atomically (``<path>.building`` then rename); returns its manifest + sha."""
    weights = dict(DEFAULT_FIELD_WEIGHTS if field_weights is None else field_weights)
    _check_weights(weights)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".building")
    temporary.unlink(missing_ok=True)
    connection = sqlite3.connect(temporary)
    try:
        connection.execute(
            "CREATE VIRTUAL TABLE products USING fts5("
            "asin UNINDEXED, title, brand, category, model, attributes, options, bullets, "
            "tokenize='unicode61 remove_diacritics 2')"
        )
        connection.execute("CREATE TABLE manifest(payload TEXT NOT NULL)")
        seen: set[str] = set()
        rows = []
        for product in products:
            asin = str(product.get("asin") or "").strip()
            if not asin or asin == "nan" or asin in seen:
                continue
            seen.add(asin)
            fields = product_search_fields(product)
            rows.append((asin, *(fields[name] for name in FIELDS)))
        connection.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        connection.execute("INSERT INTO products(products) VALUES ('optimize')")
        manifest = {
            "search_version": versions.SEARCH_VERSION,
            "index_schema_version": versions.INDEX_SCHEMA_VERSION,
            "product_count": len(rows),
            "product_data_sha256": product_data_sha256,
            "field_weights": weights,
            "fts_columns": list(FTS_COLUMNS),
            "bm25_column_weights": _bm25_weights(weights),
            "option_document_version": versions.OPTION_DOCUMENT_VERSION,
            "query_normalizer": versions.QUERY_NORMALIZER_VERSION,
            "tokenizer": versions.TOKENIZER_VERSION,
            "tie_breaker": versions.TIE_BREAKER,
            "python_version": platform.python_version(),
            "sqlite_version": sqlite3.sqlite_version,
        }
        connection.execute(
            "INSERT INTO manifest(payload) VALUES (?)", (json.dumps(manifest, sort_keys=True, ensure_ascii=False),)
        )
        connection.commit()
        connection.execute("VACUUM")
    finally:
        connection.close()
    os.replace(temporary, target)
    return {**manifest, "index_sha256": _sha256_file(target)}


class SearchIndex:
    """A read-only, validated index; ``search`` is cached and safe to call from many threads."""

    def __init__(self, path: Path, manifest: Mapping[str, Any]) -> None:
        self.path = path
        self.manifest = dict(manifest)
        weights = manifest["bm25_column_weights"]
        self._weights = tuple(float(weights[name]) for name in FTS_COLUMNS)
        placeholders = ", ".join(repr(w) for w in self._weights)
        self._sql = (
            f"SELECT asin, bm25(products, {placeholders}) AS score FROM products "
            "WHERE products MATCH ? ORDER BY score ASC, asin ASC LIMIT ?"
        )
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._cached = lru_cache(maxsize=CACHE_SIZE)(self._run_tokens)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, expected_product_sha256: str | None = None) -> SearchIndex:
        file = Path(path)
        if not file.is_file():
            raise SearchIndexError(f"ShopSimulator search index not found: {file}. Run `shopsimrl data prepare` first.")
        try:
            connection = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
            try:
                row = connection.execute("SELECT payload FROM manifest").fetchone()
            finally:
                connection.close()
            manifest = json.loads(row[0])
            if not isinstance(manifest, dict):
                raise ValueError("manifest is not an object")
        except (sqlite3.Error, TypeError, ValueError) as exc:
            raise SearchIndexError(f"invalid ShopSimulator search index manifest: {exc}; {REBUILD_HINT}") from exc
        problems = []
        if manifest.get("search_version") != versions.SEARCH_VERSION:
            problems.append(f"search version mismatch: {manifest.get('search_version')!r} != {versions.SEARCH_VERSION!r}")
        if manifest.get("index_schema_version") != versions.INDEX_SCHEMA_VERSION:
            problems.append("index schema version mismatch")
        if manifest.get("fts_columns") != list(FTS_COLUMNS):
            problems.append("FTS column order mismatch")
        if manifest.get("option_document_version") != versions.OPTION_DOCUMENT_VERSION:
            problems.append("option document version mismatch")
        if expected_product_sha256 is not None and manifest.get("product_data_sha256") != expected_product_sha256:
            problems.append("product data SHA-256 does not match the search index")
        weights = manifest.get("field_weights")
        try:
            _check_weights(weights if isinstance(weights, Mapping) else {})
            if manifest.get("bm25_column_weights") != _bm25_weights(weights):
                raise SearchIndexError("BM25 column weights mismatch")
        except SearchIndexError as exc:
            problems.append(str(exc))
        if problems:
            raise SearchIndexError(f"{file}: " + "; ".join(problems) + f"; {REBUILD_HINT}")
        return cls(file, manifest)

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
            connection.execute("PRAGMA query_only = 1")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    @staticmethod
    def match_expression(tokens: Iterable[str]) -> str:
        return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)

    def raw_fts_query(self, tokens: tuple[str, ...], k: int) -> list[tuple[str, float]]:
        """The bare SQLite query for already tokenised text (used by benchmarks as the baseline)."""
        return self._connection().execute(self._sql, (self.match_expression(tokens), k)).fetchall()

    def _run_tokens(self, tokens: tuple[str, ...], k: int) -> tuple[SearchHit, ...]:
        rows = self.raw_fts_query(tokens, k)
        return tuple(SearchHit(rank, asin, -score) for rank, (asin, score) in enumerate(rows, start=1))

    def search_uncached(self, query: str, k: int = versions.SEARCH_TOP_K) -> list[SearchHit]:
        tokens = search_tokens(query)
        if not tokens or k <= 0:
            return []
        return list(self._run_tokens(tokens, k))

    def search(self, query: str, k: int = versions.SEARCH_TOP_K) -> list[SearchHit]:
        tokens = search_tokens(query)
        if not tokens or k <= 0:
            return []
        return list(self._cached(tokens, k))

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()
        self._cached.cache_clear()
