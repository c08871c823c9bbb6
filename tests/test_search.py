"""Search contract (env_spec §3, §10 test_search 56-61) plus property tests for the normaliser and tokenizer."""

from __future__ import annotations

import math
import re
import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsimrl.errors import SearchIndexError
from shopsimrl.search import (
    FTS_COLUMNS,
    SearchIndex,
    build_search_index,
    normalize_query,
    product_search_fields,
    search_tokens,
)
from shopsimrl.search.text import LATIN_TOKEN

PRODUCTS = [
    {"asin": "000000000003", "title": "迷你单门冰箱", "shop_name": "小熊", "category": "家电›冰箱",
     "attribute": ["宿舍", "静音"], "customization_options": {"容量": [{"value": "45升"}]}},
    {"asin": "000000000001", "title": "宿舍小冰箱", "shop_name": "海尔", "category": "家电›冰箱",
     "attribute": ["节能"], "customization_options": {"颜色": [{"value": "白色"}]}},
    {"asin": "000000000002", "title": "开放式耳机", "category": "数码›耳机", "attribute": ["低夹耳压力"],
     "instructions": [{"instruction": "hidden", "attributes": ["answer"]}]},
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    path = tmp_path_factory.mktemp("idx") / "products.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    return SearchIndex.open(path, expected_product_sha256="abc")


def test_normalizer_and_tokens_are_replayable():
    assert normalize_query("  迷你，冰箱 100 CNY ") == "迷你 冰箱 100元"
    assert search_tokens("小冰箱") == ("小冰", "冰箱")
    assert search_tokens("迷你，冰箱 100 CNY") == ("迷你", "冰箱", "元", "100")
    assert search_tokens("USB-C 数据线 2米") == ("数据", "据线", "米", "usb-c", "2")
    assert search_tokens("iPhone 15 Pro Max 256GB 黑色") == ("黑色", "iphone", "15", "pro", "max", "256gb")
    assert normalize_query("99人民币 20块钱 5 rmb") == "99元 20元 5元"


def test_product_fields_hold_only_public_facts():
    fields = product_search_fields(PRODUCTS[2])
    assert "hidden" not in str(fields) and "answer" not in str(fields)
    options = product_search_fields(
        {"customization_options": {"颜色": [{"value": "暖白", "price": 199, "metadata": "variant-secret-asin"}]}}
    )["options"]
    assert options == "颜色 暖白"
    assert product_search_fields({"title": "华为Mate60 Pro+ 5G"})["model"] == "mate60 5g"


def test_multifield_search_and_asin_tie_break_are_deterministic(index):
    assert index.manifest["product_count"] == 3
    assert re.fullmatch(r"\d+\.\d+\.\d+", index.manifest["python_version"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", index.manifest["sqlite_version"])
    hits = index.search("宿舍 冰箱", k=3)
    assert [h.asin for h in hits] == ["000000000001", "000000000003"]
    assert [h.rank for h in hits] == [1, 2]
    assert index.search("宿舍 冰箱", k=3) == hits == index.search_uncached("宿舍 冰箱", k=3)
    assert index.search("", k=3) == [] and index.search("冰箱", k=0) == []


def test_bm25_weights_align_with_declared_columns(tmp_path):
    weights = {"title": 10.0, "brand": 1.0, "category": 1.0, "model": 2.5, "attributes": 1.5, "options": 1.2, "bullets": 0.8}
    path = tmp_path / "w.sqlite3"
    manifest = build_search_index(
        [{"asin": "01", "title": "plain", "brand": "needle"}, {"asin": "02", "title": "needle", "brand": "plain"}],
        path, product_data_sha256="s", field_weights=weights,
    )
    assert manifest["fts_columns"] == list(FTS_COLUMNS) and manifest["bm25_column_weights"]["asin"] == 0.0
    hits = SearchIndex.open(path).search("needle")
    assert hits[0].asin == "02" and hits[0].score > hits[1].score


def test_scores_equal_the_bm25_formula(index):
    """Recompute FTS5's bm25 in Python (env_spec §3.4) for the fixture: proves ranking compatibility."""
    weights = dict(zip(FTS_COLUMNS, (0.0, 3.0, 2.0, 2.0, 2.5, 1.5, 1.2, 0.8), strict=True))
    docs = {p["asin"]: product_search_fields(p) for p in PRODUCTS}
    n = len(docs)
    lengths = {a: sum(len(text.split()) for text in f.values()) for a, f in docs.items()}
    avgdl = sum(lengths.values()) / n
    tokens = search_tokens("宿舍 冰箱")
    expected = {}
    for asin, fields in docs.items():
        score = 0.0
        for token in tokens:
            containing = sum(1 for f in docs.values() if any(token in text.split() for text in f.values()))
            idf = math.log((n - containing + 0.5) / (containing + 0.5))
            idf = idf if idf > 0 else 1e-6
            freq = sum(weights[c] * fields[c].split().count(token) for c in fields)
            score += idf * freq * 2.2 / (freq + 1.2 * (1 - 0.75 + 0.75 * lengths[asin] / avgdl))
        if score:
            expected[asin] = score
    got = {h.asin: h.score for h in index.search("宿舍 冰箱")}
    assert got.keys() == expected.keys()
    for asin, score in expected.items():
        assert got[asin] == pytest.approx(score, rel=1e-9)


def test_product_sha_mismatch_fails_closed(tmp_path):
    path = tmp_path / "p.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    with pytest.raises(SearchIndexError, match="SHA-256"):
        SearchIndex.open(path, expected_product_sha256="wrong")


def test_manifest_problems_are_refused_with_rebuild_hint(tmp_path):
    with pytest.raises(SearchIndexError, match="not found"):
        SearchIndex.open(tmp_path / "missing.sqlite3")
    path = tmp_path / "p.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    connection = sqlite3.connect(path)
    connection.execute("UPDATE manifest SET payload = replace(payload, 'bm25-v3', 'bm25-v2')")
    connection.commit()
    connection.close()
    with pytest.raises(SearchIndexError, match=r"search version mismatch.*--force"):
        SearchIndex.open(path)
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"not a database at all" * 100)
    with pytest.raises(SearchIndexError, match="invalid ShopSimulator search index manifest"):
        SearchIndex.open(corrupt)


def test_build_is_deterministic(tmp_path):
    a = build_search_index(PRODUCTS, tmp_path / "a.sqlite3", product_data_sha256="x")
    b = build_search_index(PRODUCTS, tmp_path / "b.sqlite3", product_data_sha256="x")
    assert a["index_sha256"] == b["index_sha256"]
    assert not (tmp_path / "a.sqlite3.building").exists()


def test_threads_share_one_index(index):
    expected = index.search_uncached("冰箱 耳机")
    results: list = []

    def worker() -> None:
        for _ in range(20):
            results.append(index.search("冰箱 耳机"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 160 and all(r == expected for r in results)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_normalizer_and_tokenizer_properties(text):
    normalized = normalize_query(text)
    assert normalize_query(normalized) == normalized
    tokens = search_tokens(text)
    assert tokens == search_tokens(normalized)
    assert len(tokens) == len(set(tokens))
    for token in tokens:
        han = all("\u3400" <= c <= "\u4dbf" or "\u4e00" <= c <= "\u9fff" for c in token)
        assert (han and 1 <= len(token) <= 2) or LATIN_TOKEN.fullmatch(token)
