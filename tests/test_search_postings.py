"""The exact in-memory ranking (``search._postings``) against SQLite FTS5 itself: byte-identical hits for random
token mixes drawn from the catalog vocabulary, on a synthetic catalog with many ties and phrase tokens and on
the default catalog when it is present; forcing SQLite; falling back when the open-time check fails."""

from __future__ import annotations

import itertools
import logging
import random
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shopsimrl.search import BACKEND_ENV, SearchIndex, build_search_index, match_expression, search_tokens
from shopsimrl.search._postings import Postings  # an internal on purpose: its ranking is what is tested
from shopsimrl.search.documents import product_search_fields

HAN = ["冰箱", "宿舍", "静音", "迷你", "耳机", "节能", "白色", "小熊", "单门", "数据线", "冰", "箱"]
LATIN = ["usb-c", "usb", "c", "2.5l", "2", "5l", "a1", "pro", "x-2", "x", "1.2", "c-usb", "usb-c-2"]
DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "default" / "products.sqlite3"


def corpus(seed: int, n: int) -> list[dict]:
    """Small products with repeated words (phrase frequencies above 1), separators and identical twins."""
    rng = random.Random(seed)

    def words(low: int, high: int) -> str:
        picked = [rng.choice(HAN + LATIN) for _ in range(rng.randint(low, high))]
        return "".join(w if w in HAN else f" {w} " for w in picked)

    products = []
    for i in range(n):
        product = {
            "asin": f"B{rng.randrange(10**6):06d}{i:03d}",
            "title": words(1, 6), "brand": words(0, 1), "category": f"家电›{words(1, 2)}",
            "attribute": [words(1, 3) for _ in range(rng.randint(0, 4))],
            "customization_options": {"颜色": [{"value": words(1, 2), "price": 9}]} if rng.random() < 0.6 else {},
            "small_description": [words(1, 4) for _ in range(rng.randint(0, 2))],
        }
        products.append(product)
        if rng.random() < 0.2:
            products.append({**product, "asin": f"A{rng.randrange(10**6):06d}{i:03d}"})
    rng.shuffle(products)
    return products


def vocabulary(products: list[dict]) -> list[str]:
    """Every docs/contract.md#search-tokeniser token of the stored fields, plus phrase tokens and words the catalog lacks."""
    tokens = {t for p in products for text in product_search_fields(p).values() for t in text.split()}
    return sorted(tokens | set(LATIN) | {"冰箱宿", "想买", "一款", "zzz9", "usb-x", "-", "USB", "鿿", "a b"})


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    products = corpus(7, 160)
    path = tmp_path_factory.mktemp("postings") / "p.sqlite3"
    build_search_index(products, path, product_data_sha256="x")
    fast, slow = SearchIndex.open(path), SearchIndex.open(path, accelerate=False)
    assert fast.backend == "postings" and fast.postings is not None, fast.backend_reason
    assert slow.backend == "sqlite" and slow.postings is None
    yield fast, slow, vocabulary(products)
    fast.close()
    slow.close()


def assert_same(fast: SearchIndex, slow: SearchIndex, tokens: tuple[str, ...], k: int) -> None:
    ours = fast.search_tokens(tokens, k)
    assert ours == slow.search_tokens(tokens, k)
    rows = slow.raw_fts_query(tokens, k, contract_sql=True) if tokens and k > 0 else []
    assert [(h.asin, h.score) for h in ours] == [(asin, -bm25) for asin, bm25 in rows]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), k=st.sampled_from([1, 2, 5, 20, 150, 1000]))
def test_random_token_mixes_rank_byte_identically(pair, data, k):
    fast, slow, vocab = pair
    tokens = tuple(data.draw(st.lists(st.sampled_from(vocab), min_size=1, max_size=12)))
    assert_same(fast, slow, tokens, k)
    text = " ".join(tokens)
    assert fast.search_uncached(text, k) == slow.search_uncached(text, k)


def test_phrases_frequencies_and_ties_are_exercised(pair):
    fast, slow, _ = pair
    postings = fast.postings
    assert postings is not None
    hits = fast.search_tokens(("usb-c",), 1000)
    assert hits and hits == slow.search_tokens(("usb-c",), 1000)
    # ``usb-c`` (a two-token phrase) matches fewer rows than ``usb`` and ``c`` apart.
    assert len(hits) < min(len(fast.search_tokens(("usb",), 1000)), len(fast.search_tokens(("c",), 1000)))
    assert float(postings._freq_values.max()) > 3.0  # some phrase occurs more than once in a row
    everything = fast.search_tokens(tuple(HAN + LATIN), 1000)
    assert any(a.score == b.score for a, b in itertools.pairwise(everything))  # ASIN tie-break
    assert everything == slow.search_tokens(tuple(HAN + LATIN), 1000)
    for tokens in (("USB",), ("-", "冰箱"), ("\U00020000",)):  # folded, empty, outside docs/contract.md#search-tokeniser: left to SQLite
        assert postings.rank(tokens, 10) is None
        assert_same(fast, slow, tokens, 10)
    for tokens in (("鿿",), ("a b",), ("想买",)):  # a Han code point unicode61 keeps, a phrase, no hits
        assert postings.rank(tokens, 10) is not None
        assert_same(fast, slow, tokens, 10)


def test_reference_row_order_index_uses_postings_with_asin_ties(tmp_path):
    products = corpus(11, 90)
    path = tmp_path / "foreign.sqlite3"
    ours = tmp_path / "ours.sqlite3"
    build_search_index(products, ours, product_data_sha256="x")
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, title, brand, category, model, attributes, "
        "options, bullets, tokenize='unicode61 remove_diacritics 2')"
    )
    connection.execute("CREATE TABLE manifest(payload TEXT NOT NULL)")
    for product in sorted(products, key=lambda p: p["asin"], reverse=True):
        fields = product_search_fields(product)
        connection.execute("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (product["asin"], *fields.values()))
    payload = sqlite3.connect(ours).execute("SELECT payload FROM manifest").fetchone()[0]
    connection.execute("INSERT INTO manifest VALUES (?)", (payload,))
    connection.commit()
    connection.close()
    fast, slow = SearchIndex.open(path), SearchIndex.open(path, accelerate=False)
    assert fast.backend == "postings" and not fast.rowid_is_asin_order
    rng = random.Random(3)
    vocab = vocabulary(products)
    for _ in range(60):
        assert_same(fast, slow, tuple(rng.sample(vocab, rng.randint(1, 8))), rng.choice([3, 150]))


def test_environment_variable_forces_sqlite(tmp_path, monkeypatch):
    path = tmp_path / "p.sqlite3"
    build_search_index(corpus(1, 20), path, product_data_sha256="x")
    monkeypatch.setenv(BACKEND_ENV, "sqlite")
    forced = SearchIndex.open(path)
    assert forced.backend == "sqlite" and forced.postings is None and "forced" in forced.backend_reason
    assert SearchIndex.open(path, accelerate=True).backend == "postings"
    monkeypatch.delenv(BACKEND_ENV)
    assert SearchIndex.open(path).backend == "postings"
    assert forced.search("冰箱 usb-c") == SearchIndex.open(path).search("冰箱 usb-c")


def test_a_ranking_that_differs_from_sqlite_is_refused_and_logged(tmp_path, monkeypatch, caplog):
    path = tmp_path / "p.sqlite3"
    build_search_index(corpus(2, 40), path, product_data_sha256="x")
    exact = Postings.rank

    def off_by_one_ulp(self, tokens, k):
        ranked = exact(self, tokens, k)
        return ranked and [(rowid, score * (1 + 2**-52)) for rowid, score in ranked]

    monkeypatch.setattr(Postings, "rank", off_by_one_ulp)
    with caplog.at_level(logging.WARNING, logger="shopsimrl.search"):
        index = SearchIndex.open(path)
    assert index.backend == "sqlite" and index.postings is None
    assert "differs from SQLite" in index.backend_reason and "ranks with SQLite" in caplog.text
    monkeypatch.setattr(Postings, "rank", exact)
    assert index.search("冰箱") == SearchIndex.open(path).search("冰箱")


def test_postings_disagreeing_with_fts5_statistics_are_refused(tmp_path):
    """A stored row whose text unicode61 splits differently than the emulation (uppercase: folded) is refused."""
    path = tmp_path / "p.sqlite3"
    build_search_index(corpus(5, 20), path, product_data_sha256="x")
    connection = sqlite3.connect(path)
    connection.execute("UPDATE products SET title = 'USB 冰箱' WHERE rowid = 1")
    connection.commit()
    connection.close()
    index = SearchIndex.open(path)
    assert index.backend == "sqlite" and "not an FTS5 term" in index.backend_reason
    assert index.search("usb") == SearchIndex.open(path, accelerate=False).search("usb")


@pytest.mark.skipif(not DEFAULT_DATA.is_file(), reason="data/default is not built (shopsimrl data build-default)")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_default_catalog_random_token_mixes(default_pair, data):
    fast, slow, vocab = default_pair
    tokens = tuple(data.draw(st.lists(st.sampled_from(vocab), min_size=1, max_size=10)))
    assert_same(fast, slow, tokens, 150)


@pytest.fixture(scope="module")
def default_pair():
    fast, slow = SearchIndex.open(DEFAULT_DATA), SearchIndex.open(DEFAULT_DATA, accelerate=False)
    assert fast.backend == "postings", fast.backend_reason
    connection = sqlite3.connect(f"{DEFAULT_DATA.as_uri()}?mode=ro", uri=True)
    rows = connection.execute("SELECT title, attributes, options FROM products WHERE rowid % 50 = 0").fetchall()
    connection.close()
    vocab = sorted({t for row in rows for text in row for t in str(text).split()} | {"想买", "一款", "usb-c"})
    yield fast, slow, vocab
    fast.close()
    slow.close()


def test_match_expression_and_tokens_agree_with_the_hits(pair):
    fast, _, _ = pair
    assert match_expression(search_tokens("宿舍 冰箱")) == '"宿舍" OR "冰箱"'
    assert fast.search("宿舍 冰箱") == list(fast.search_tokens(("宿舍", "冰箱")))
