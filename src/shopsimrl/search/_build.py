"""Building the FTS5 index: products staged by ASIN, written in ASIN order, renamed into place atomically.

Why ASIN order: the rowid then *is* the contract's tie-break order, which lets the query path rank by rowid
(cheaper than reading every matching row's ASIN) with the same results (see ``_index``).
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import versions
from ..hashing import file_sha256
from ._schema import (
    CREATE_PRODUCTS_SQL,
    DEFAULT_FIELD_WEIGHTS,
    FTS_COLUMNS,
    bm25_column_weights,
    weights_are_valid,
)
from .documents import FIELDS, product_search_fields

_STAGE_COLUMNS = ", ".join(FIELDS)


def _stage_rows(products: Iterable[Mapping[str, Any]], connection: sqlite3.Connection) -> int:
    """Put one row per usable ASIN into the staging table (empty, ``nan`` and repeated ASINs skipped, the first
    one wins); returns the row count. The table is keyed by ASIN, so it reads back in ASIN order from disk and
    a million products never have to be held and sorted in memory."""
    connection.execute(f"CREATE TABLE stage(asin TEXT PRIMARY KEY, {_STAGE_COLUMNS}) WITHOUT ROWID")
    connection.execute("BEGIN")

    def rows() -> Iterator[tuple[str, ...]]:
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


def _index_manifest(count: int, product_data_sha256: str, weights: dict[str, float]) -> dict[str, Any]:
    """The manifest row stored in the index: what it was built from and with (the open-time checks read it)."""
    return {
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


def build_search_index(
    products: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    product_data_sha256: str,
    field_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Build the index at ``path`` atomically (``<path>.building``, then rename).

    The same products, sha and weights give a byte-identical file with the same Python and SQLite versions.

    Args:
        products: product records (archive fields); empty, ``nan`` and repeated ASINs are skipped.
        path: where the index file goes (its folder is created).
        product_data_sha256: the SHA-256 of the product data, recorded for the open-time check.
        field_weights: the 7 field weights (default ``DEFAULT_FIELD_WEIGHTS``).

    Returns:
        The manifest stored in the index, plus ``index_sha256`` (the file's SHA-256).

    Raises:
        ValueError: the field weights are not exactly the 7 fields with finite positive values.
    """
    source = DEFAULT_FIELD_WEIGHTS if field_weights is None else field_weights
    if not weights_are_valid(source):
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
    manifest = _index_manifest(count, product_data_sha256, weights)
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
    return {**manifest, "index_sha256": file_sha256(target)}
