"""Ranking compatibility (docs/contract.md#search-ranking): scores equal the documented BM25 formula computed independently in
Python, the ASIN tie-break holds, and an index in the reference's row order ranks exactly the same."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import sqlite3

import pytest

from shopsimrl.search import (
    DEFAULT_FIELD_WEIGHTS,
    FTS_COLUMNS,
    SearchIndex,
    build_search_index,
    search_tokens,
)
from shopsimrl.search.documents import FIELDS, product_search_fields

HAN = ["冰箱", "宿舍", "静音", "迷你", "耳机", "节能", "白色", "小熊", "单门", "数据线"]
LATIN = ["usb-c", "usb", "c", "2.5l", "a1", "pro", "x-2"]
K1, B = 1.2, 0.75


def corpus(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)

    def words(low: int, high: int) -> str:
        picked = [rng.choice(HAN + LATIN) for _ in range(rng.randint(low, high))]
        return "".join(w if w in HAN else f" {w} " for w in picked)

    products = []
    for i in range(n):
        product = {
            "asin": f"B{rng.randrange(10**6):06d}{i:03d}",
            "title": words(1, 5), "brand": words(0, 1), "category": f"家电›{words(1, 2)}",
            "attribute": [words(1, 2) for _ in range(rng.randint(0, 3))],
            "customization_options": {"颜色": [{"value": words(1, 1), "price": 9}]} if rng.random() < 0.6 else {},
            "small_description": [words(1, 3)] if rng.random() < 0.5 else [],
        }
        products.append(product)
        if rng.random() < 0.15:  # an identical twin under another ASIN: equal scores, ASIN decides
            products.append({**product, "asin": f"A{rng.randrange(10**6):06d}{i:03d}"})
    rng.shuffle(products)
    return products


def fts_tokens(text: str) -> list[str]:
    """What unicode61 stores for our field text: runs of Han / [a-z0-9], split at spaces and ``._+-/``."""
    return re.findall(r"[a-z0-9\u3400-\u4dbf\u4e00-\u9fff]+", text)


def python_bm25(products: list[dict], query: str, weights: dict[str, float]) -> dict[str, float]:
    """-bm25 of every matching product, from the formula written out in docs/contract.md#search-ranking."""
    docs = {p["asin"]: {c: fts_tokens(t) for c, t in product_search_fields(p).items()} for p in products}
    phrases = [fts_tokens(token) for token in search_tokens(query)]

    def occurrences(tokens: list[str], phrase: list[str]) -> int:
        return sum(1 for i in range(len(tokens) - len(phrase) + 1) if tokens[i : i + len(phrase)] == phrase)

    n_rows = len(docs)
    lengths = {asin: sum(len(t) for t in cols.values()) for asin, cols in docs.items()}
    avgdl = sum(lengths.values()) / n_rows
    freqs = {asin: [sum(weights[c] * occurrences(cols[c], p) for c in FIELDS) for p in phrases] for asin, cols in docs.items()}
    hits = {asin: [any(occurrences(cols[c], p) for c in FIELDS) for p in phrases] for asin, cols in docs.items()}
    scores = {}
    for asin in docs:
        if not any(hits[asin]):
            continue
        score = 0.0
        for i in range(len(phrases)):
            n_i = sum(1 for other in docs if hits[other][i])
            idf = math.log((n_rows - n_i + 0.5) / (n_i + 0.5))
            idf = idf if idf > 0 else 1e-6
            f = freqs[asin][i]
            score += idf * (f * (K1 + 1)) / (f + K1 * (1 - B + B * lengths[asin] / avgdl))
        scores[asin] = score
    return scores


QUERIES = ["宿舍 冰箱", "usb-c 数据线", "静音迷你耳机 a1", "2.5l pro", "x-2 c", "白色 单门 冰箱 节能 小熊", "usb", "耳机"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scores_and_order_equal_the_bm25_formula(tmp_path, seed):
    products = corpus(seed, 60)
    weights = dict(DEFAULT_FIELD_WEIGHTS) if seed != 3 else {**DEFAULT_FIELD_WEIGHTS, "title": 10.0, "brand": 1.0}
    path = tmp_path / "p.sqlite3"
    build_search_index(products, path, product_data_sha256="x", field_weights=weights)
    index = SearchIndex.open(path)
    ties = 0
    for query in QUERIES:
        expected = python_bm25(products, query, weights)
        hits = index.search_uncached(query, k=1000)
        assert {h.asin: h.score for h in hits} == pytest.approx(expected, rel=1e-12)
        assert [h.asin for h in hits] == sorted(expected, key=lambda a: (-expected[a], a))
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        ties += sum(1 for a, b in itertools.pairwise(hits) if a.score == b.score)
        for k in (1, 3, 10):
            assert index.search(query, k=k) == hits[:k]
    assert ties > 0  # the corpus really exercises the ASIN tie-break


def test_an_index_in_reference_row_order_ranks_identically(tmp_path):
    """A table filled in archive order (not ASIN order) is queried with the contract SQL: same hits, same scores."""
    products = corpus(4, 80)
    ours = tmp_path / "ours.sqlite3"
    build_search_index(products, ours, product_data_sha256="x")
    foreign = tmp_path / "foreign.sqlite3"
    connection = sqlite3.connect(foreign)
    connection.execute(
        "CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, title, brand, category, model, attributes, "
        "options, bullets, tokenize='unicode61 remove_diacritics 2')"
    )
    connection.execute("CREATE TABLE manifest(payload TEXT NOT NULL)")
    for product in sorted(products, key=lambda p: p["asin"], reverse=True):
        fields = product_search_fields(product)
        connection.execute("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (product["asin"], *fields.values()))
    payload = json.loads(sqlite3.connect(ours).execute("SELECT payload FROM manifest").fetchone()[0])
    connection.execute("INSERT INTO manifest VALUES (?)", (json.dumps(payload, sort_keys=True, ensure_ascii=False),))
    connection.commit()
    connection.close()
    fast, reference = SearchIndex.open(ours), SearchIndex.open(foreign)
    assert fast.rowid_is_asin_order and not reference.rowid_is_asin_order
    assert list(FTS_COLUMNS) == payload["fts_columns"]
    for query in QUERIES:
        assert fast.search_uncached(query) == reference.search_uncached(query)
        rows = reference.raw_fts_query(search_tokens(query), 150, contract_sql=True)
        assert [(h.asin, h.score) for h in fast.search(query)] == [(asin, -bm25) for asin, bm25 in rows]
