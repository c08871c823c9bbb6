"""The open-time checks (docs/contract.md#search-index-manifest): the stored manifest and the FTS5 table against what this code expects.

Why: an index built by another version, with other weights, for other product data or with another table
definition would rank differently without failing; every such difference is listed, so the refusal names all
of them at once.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from typing import Any

from .. import versions
from ._schema import FTS_COLUMNS, TOKENIZE, bm25_column_weights, weights_are_valid


def manifest_row(connection: sqlite3.Connection) -> dict[str, Any]:
    """The index's one manifest row as a JSON object (ValueError / sqlite3.Error otherwise)."""
    rows = connection.execute("SELECT payload FROM manifest").fetchall()
    if len(rows) != 1:
        raise ValueError(f"expected one manifest row, found {len(rows)}")
    manifest = json.loads(rows[0][0])
    if not isinstance(manifest, dict):
        raise ValueError("the manifest is not a JSON object")
    return manifest


def manifest_problems(
    manifest: Mapping[str, Any], expected_product_sha256: str | None, expected_field_weights: Mapping[str, float] | None
) -> list[str]:
    """Every docs/contract.md#search-index-manifest check (plus the normaliser, tokenizer and tie-break versions) that the manifest fails."""
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
        or not weights_are_valid(weights)
        or manifest.get("bm25_column_weights") != bm25_column_weights(weights)
        or (expected_field_weights is not None and dict(weights) != dict(expected_field_weights))
    ):
        problems.append("BM25 column weights mismatch")
    count = manifest.get("product_count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        problems.append(f"invalid product_count {count!r}")
    return problems


def table_definition_problems(connection: sqlite3.Connection) -> list[str]:
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


def read_table(connection: sqlite3.Connection, manifest: Mapping[str, Any]) -> tuple[list[str], dict[int, str]]:
    """Check that the stored table really is the declared FTS5 table; return the problems and rowid → ASIN."""
    problems = table_definition_problems(connection)
    if problems:
        return problems, {}
    asins: dict[int, str] = dict(connection.execute("SELECT rowid, asin FROM products ORDER BY rowid"))
    if len(asins) != manifest.get("product_count"):
        problems.append(f"product count mismatch: table has {len(asins)}, manifest says {manifest.get('product_count')}")
    if len(set(asins.values())) != len(asins) or not all(isinstance(a, str) for a in asins.values()):
        problems.append("the table holds duplicate or non-text ASINs")
    return problems, asins
