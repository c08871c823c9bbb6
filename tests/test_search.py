"""Search contract (docs/contract.md#search, acceptance cases 56-61): normaliser, tokenizer, documents, index, evaluation."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading

import pytest

from error_kinds import raises_kind
from shopsimrl.errors import DataError
from shopsimrl.search import (
    DEFAULT_FIELD_WEIGHTS,
    FTS_COLUMNS,
    RetrievalQuery,
    SearchHit,
    SearchIndex,
    build_search_index,
    evaluate_retrieval,
    normalize_query,
    product_search_fields,
    search_tokens,
)

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
    with SearchIndex.open(path, expected_product_sha256="abc") as opened:
        yield opened


# -- docs/contract.md#search-normaliser / docs/contract.md#search-tokeniser -------------------------------------------------------------------------------------------


def test_normalizer_and_tokens_are_replayable():  # acceptance case 56
    assert normalize_query("  迷你，冰箱 100 CNY ") == "迷你 冰箱 100元"
    assert search_tokens("小冰箱") == ("小冰", "冰箱")


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("小冰箱", ("小冰", "冰箱")),
        ("迷你，冰箱 100 CNY", ("迷你", "冰箱", "元", "100")),
        ("USB-C 数据线 2米", ("数据", "据线", "米", "usb-c", "2")),
        ("iPhone 15 Pro Max 256GB 黑色", ("黑色", "iphone", "15", "pro", "max", "256gb")),
        ("", ()),
        (None, ()),
        ("冰箱 冰箱 冰", ("冰箱", "冰")),
        ("Ｗｉｆｉ６　路由器", ("路由", "由器", "wifi6")),
        ("café naïve ☆ 한국어", ("caf", "na", "ve")),
        ("a.b_c+d-e/f g..h", ("a.b_c+d-e/f", "g", "h")),
        ("㐀䶿一鿿", ("㐀䶿", "䶿一", "一鿿")),
    ],
)
def test_tokenizer_examples(text, tokens):
    assert search_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("  迷你，冰箱 100 CNY ", "迷你 冰箱 100元"),
        ("99人民币 20块钱 5 rmb 7yuan", "99元 20元 5元 7元"),
        ("100 CNYX 元", "100 cnyx 元"),  # not at a word boundary
        ("cny 100", "cny 100"),  # the word must follow a digit
        ("ＡＢＣ！！？？、|ｄ；：e", "abc d e"),
        ("a\t\n b\u3000c", "a b c"),
        (12.5, "12.5"),
        (None, ""),
        # The reference applies the currency rule before punctuation becomes a space (kept for compatibility):
        ("1,rmb", "1 rmb"),
    ],
)
def test_normalizer_examples(text, normalized):
    assert normalize_query(text) == normalized


# -- docs/contract.md#search-fields ---------------------------------------------------------------------------------------------------


def test_product_fields_do_not_include_goal_or_reward():  # acceptance case 57
    fields = product_search_fields(PRODUCTS[2])
    text = json.dumps(fields, ensure_ascii=False)
    assert "hidden" not in text and "answer" not in text
    assert fields == {
        "title": "开放 放式 式耳 耳机", "brand": "", "category": "数码 耳机", "model": "",
        "attributes": "低夹 夹耳 耳压 压力", "options": "", "bullets": "",
    }


def test_option_document_contains_only_public_axes_and_values():  # acceptance case 58
    product = {"customization_options": {"颜色": [
        {"value": "暖白", "price": 199, "metadata": "variant-secret-asin", "image": "http://img/1.jpg"}
    ]}}
    options = product_search_fields(product)["options"]
    assert options == "颜色 暖白"
    for secret in ("metadata", "199", "variant-secret-asin", "img"):
        assert secret not in json.dumps(product_search_fields(product), ensure_ascii=False)


def test_document_fields_follow_the_fallbacks_of_section_3_3():
    fields = product_search_fields({
        "Title": "华为Mate60 Pro+ 5G 手机", "shop_name": "华为官方", "product_category": "数码›手机",
        "Attributes": {"网络": ["5G", "4G"], "颜色": "黑"},
        "customization_options": {}, "options": {" 内存 ": ["8+256", "", None, " "], "版本": {"a", "b"}},
        "sub_title": "旗舰", "BulletPoints": ["ignored"], "pricing": [4999, 6999], "instruction": "secret",
    })
    assert fields == {
        "title": "华为 手机 mate60 pro 5g", "brand": "华为 为官 官方", "category": "数码 手机", "model": "mate60 5g",
        "attributes": "网络 颜色 黑 5g 4g", "options": "内存 版本 8+256 a b", "bullets": "旗舰",
    }
    assert product_search_fields({"title": "华为Mate60 Pro+ 5G"})["model"] == "mate60 5g"
    assert product_search_fields({"title": "x1 ab12-cd a1b2 12 abc a1b2"})["model"] == "x1 ab12-cd a1b2"


def test_flatten_orders_dict_keys_and_sets_by_str():
    fields = product_search_fields({"attribute": {"b": {"y": 2, "x": [1, None]}, "a": {"z"}}, "small_description": []})
    assert fields["attributes"] == "a z b x 1 y 2"
    assert fields["bullets"] == ""


# -- docs/contract.md#search-ranking / docs/contract.md#search-index-manifest index ---------------------------------------------------------------------------------------


def test_multifield_search_and_asin_tie_break_are_deterministic(index):  # acceptance case 59
    assert index.manifest["product_count"] == 3
    assert re.fullmatch(r"\d+\.\d+\.\d+", index.manifest["python_version"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", index.manifest["sqlite_version"])
    hits = index.search("宿舍 冰箱", k=3)
    assert hits[0].asin == "000000000001"
    assert [h.asin for h in hits] == ["000000000001", "000000000003"]  # docs/contract.md#search-ranking anchor: only these two match
    assert [h.rank for h in hits] == [1, 2]
    assert all(isinstance(h, SearchHit) for h in hits) and hits[0].score > hits[1].score > 0
    assert index.search("宿舍 冰箱", k=3) == hits == index.search_uncached("宿舍 冰箱", k=3)
    assert index.search("宿舍 冰箱", k=1) == hits[:1]
    assert index.search("", k=3) == [] and index.search("，。!", k=3) == [] and index.search("冰箱", k=0) == []
    with pytest.raises(AttributeError):
        hits[0].rank = 5  # type: ignore[misc]


def test_bm25_weights_align_with_the_declared_fts_columns(tmp_path):  # acceptance case 60
    weights = {**DEFAULT_FIELD_WEIGHTS, "title": 10, "brand": 1, "category": 1}
    path = tmp_path / "w.sqlite3"
    manifest = build_search_index(
        [{"asin": "01", "title": "plain", "brand": "needle"}, {"asin": "02", "title": "needle", "brand": "plain"}],
        path, product_data_sha256="s", field_weights=weights,
    )
    assert manifest["fts_columns"] == list(FTS_COLUMNS)
    assert manifest["bm25_column_weights"]["asin"] == 0.0
    assert list(manifest["bm25_column_weights"]) == list(FTS_COLUMNS)
    hits = SearchIndex.open(path).search("needle")
    assert hits[0].asin == "02" and hits[0].score > hits[1].score


def test_product_sha_mismatch_fails_closed(tmp_path):  # acceptance case 61
    path = tmp_path / "p.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    with raises_kind(DataError, "search_unavailable", match="SHA-256"):
        SearchIndex.open(path, expected_product_sha256="wrong")
    SearchIndex.open(path, expected_product_sha256="abc").close()


def test_manifest_keys_and_returned_sha(tmp_path):
    path = tmp_path / "p.sqlite3"
    manifest = build_search_index(PRODUCTS, path, product_data_sha256="abc")
    assert set(manifest) == {
        "search_version", "index_schema_version", "product_count", "product_data_sha256", "field_weights",
        "fts_columns", "bm25_column_weights", "option_document_version", "query_normalizer", "tokenizer",
        "tie_breaker", "python_version", "sqlite_version", "index_sha256",
    }
    assert manifest["search_version"] == "shopsimulator-multifield-bm25-v3"
    assert manifest["index_schema_version"] == 1
    assert manifest["option_document_version"] == "public-axis-value-v1"
    assert manifest["query_normalizer"] == "nfkc-casefold-basic-punctuation-v1"
    assert manifest["tokenizer"] == "han-bigram-latin-number-v1"
    assert manifest["tie_breaker"] == "asin-ascending"
    assert manifest["bm25_column_weights"] == {
        "asin": 0.0, "title": 3.0, "brand": 2.0, "category": 2.0, "model": 2.5, "attributes": 1.5, "options": 1.2,
        "bullets": 0.8,
    }
    import hashlib

    assert manifest["index_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    connection = sqlite3.connect(path)
    (payload,) = connection.execute("SELECT payload FROM manifest").fetchone()
    (create_sql,) = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'products'").fetchone()
    connection.close()
    stored = {k: v for k, v in manifest.items() if k != "index_sha256"}
    assert payload == json.dumps(stored, sort_keys=True, ensure_ascii=False)
    assert create_sql == (
        "CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, title, brand, category, model, attributes, "
        "options, bullets, tokenize='unicode61 remove_diacritics 2')"
    )


def test_build_skips_unusable_asins_first_one_wins(tmp_path):
    products = [
        {"asin": "b", "title": "第一"}, {"asin": "", "title": "空"}, {"asin": "nan", "title": "非数"},
        {"asin": float("nan"), "title": "非数"}, {"title": "无"}, {"asin": "b", "title": "第二"}, {"asin": "a", "title": "甲"},
    ]
    path = tmp_path / "p.sqlite3"
    assert build_search_index(products, path, product_data_sha256="x")["product_count"] == 2
    index = SearchIndex.open(path)
    assert [h.asin for h in index.search("第一")] == ["b"]
    assert index.search("第二 空 非数 无") == []


def test_build_is_deterministic_and_atomic(tmp_path):
    a = build_search_index(PRODUCTS, tmp_path / "a.sqlite3", product_data_sha256="x")
    b = build_search_index(list(reversed(PRODUCTS)), tmp_path / "b.sqlite3", product_data_sha256="x")
    assert a["index_sha256"] == b["index_sha256"]
    assert (tmp_path / "a.sqlite3").read_bytes() == (tmp_path / "b.sqlite3").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite3", "b.sqlite3"]
    # a failing build leaves the existing index untouched and no temporary file behind
    before = (tmp_path / "a.sqlite3").read_bytes()

    def broken():
        yield PRODUCTS[0]
        raise RuntimeError("archive read failed")

    with pytest.raises(RuntimeError):
        build_search_index(broken(), tmp_path / "a.sqlite3", product_data_sha256="x")
    assert (tmp_path / "a.sqlite3").read_bytes() == before
    assert not (tmp_path / "a.sqlite3.building").exists()
    with pytest.raises(ValueError, match="field_weights"):
        build_search_index(PRODUCTS, tmp_path / "c.sqlite3", product_data_sha256="x", field_weights={"title": 1.0})


def _edit_manifest(path, **changes):
    connection = sqlite3.connect(path)
    manifest = json.loads(connection.execute("SELECT payload FROM manifest").fetchone()[0])
    manifest.update(changes)
    connection.execute("UPDATE manifest SET payload = ?", (json.dumps(manifest),))
    connection.commit()
    connection.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"search_version": "shopsimulator-multifield-bm25-v2"}, "search version mismatch"),
        ({"index_schema_version": 2}, "index schema version mismatch"),
        ({"fts_columns": ["asin", "brand", "title", "category", "model", "attributes", "options", "bullets"]},
         "FTS column order mismatch"),
        ({"option_document_version": "public-axis-value-v0"}, "option document version mismatch"),
        ({"tokenizer": "jieba"}, "tokenizer mismatch"),
        ({"field_weights": {**DEFAULT_FIELD_WEIGHTS, "title": 4.0}}, "BM25 column weights mismatch"),
        ({"field_weights": {**DEFAULT_FIELD_WEIGHTS, "title": -1.0}}, "BM25 column weights mismatch"),
        ({"field_weights": {"title": 3.0}}, "BM25 column weights mismatch"),
        ({"bm25_column_weights": {"asin": 1.0, **DEFAULT_FIELD_WEIGHTS}}, "BM25 column weights mismatch"),
        ({"product_count": 4}, "product count mismatch"),
    ],
)
def test_manifest_mismatches_are_refused_with_a_rebuild_hint(tmp_path, changes, message):
    path = tmp_path / "p.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    _edit_manifest(path, **changes)
    with raises_kind(DataError, "search_unavailable", match=re.escape(message)) as error:
        SearchIndex.open(path)
    assert f"shopsimrl data prepare --archive ARCHIVE --out {tmp_path} --force" in str(error.value)


def test_unreadable_or_foreign_indexes_are_refused(tmp_path):
    with raises_kind(DataError, "search_unavailable", match=r"ShopSimulator search index not found: .*shopsimrl data prepare"):
        SearchIndex.open(tmp_path / "missing.sqlite3")
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"not a database at all" * 100)
    with raises_kind(DataError, "search_unavailable", match=r"invalid ShopSimulator search index manifest.*--force"):
        SearchIndex.open(corrupt)
    good = tmp_path / "good.sqlite3"
    build_search_index(PRODUCTS, good, product_data_sha256="abc")
    two_rows = tmp_path / "two.sqlite3"
    two_rows.write_bytes(good.read_bytes())
    connection = sqlite3.connect(two_rows)
    connection.execute("INSERT INTO manifest SELECT payload FROM manifest")
    connection.commit()
    connection.close()
    with raises_kind(DataError, "search_unavailable", match="invalid ShopSimulator search index manifest"):
        SearchIndex.open(two_rows)
    # a table whose real columns differ from what its manifest claims
    swapped = tmp_path / "swapped.sqlite3"
    connection = sqlite3.connect(swapped)
    connection.execute(
        "CREATE VIRTUAL TABLE products USING fts5(asin UNINDEXED, brand, title, category, model, attributes, "
        "options, bullets, tokenize='unicode61 remove_diacritics 2')"
    )
    connection.execute("CREATE TABLE manifest(payload TEXT NOT NULL)")
    payload = sqlite3.connect(good).execute("SELECT payload FROM manifest").fetchone()[0]
    connection.execute("INSERT INTO manifest VALUES (?)", (payload,))
    connection.commit()
    connection.close()
    with raises_kind(DataError, "search_unavailable", match="FTS column order mismatch"):
        SearchIndex.open(swapped)


def test_expected_field_weights_are_checked(tmp_path):
    path = tmp_path / "p.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc", field_weights={**DEFAULT_FIELD_WEIGHTS, "title": 5.0})
    SearchIndex.open(path).close()
    with raises_kind(DataError, "search_unavailable", match="BM25 column weights mismatch"):
        SearchIndex.open(path, expected_field_weights=DEFAULT_FIELD_WEIGHTS)


def test_opened_index_is_read_only(index):
    # an internal on purpose: the pooled connections themselves
    with index._pool.connection() as connection, pytest.raises(sqlite3.OperationalError):
        connection.execute("DELETE FROM manifest")


def test_cache_returns_exactly_the_uncached_results(index):
    queries = ["宿舍 冰箱", "冰箱", "耳机 冰箱 静音", "海尔", "家电", "小熊 45升", "白色", "nothing"]
    for query in queries:
        for k in (1, 2, 150):
            first = index.search(query, k=k)
            assert first == index.search_uncached(query, k=k) == index.search(query, k=k)
    before = index.cache_info().hits
    index.search("宿舍，冰箱")  # normalises to the same tokens as "宿舍 冰箱": a cache hit
    assert index.cache_info().hits == before + 1
    index.search("冰箱 宿舍")  # other token order, other FTS query: a miss
    assert index.cache_info().hits == before + 1
    result = index.search("冰箱")
    result.clear()  # callers get their own list; the cached tuple is untouched
    assert index.search("冰箱") == index.search_uncached("冰箱")


def test_concurrent_searches_from_8_threads_are_identical(tmp_path):
    products = [
        {"asin": f"{i:012d}", "title": f"{['冰箱', '耳机', '水壶', '枕头'][i % 4]}{['静音', '节能', '迷你'][i % 3]}款{i % 7}号",
         "attribute": [["宿舍", "办公"][i % 2]]}
        for i in range(300)
    ]
    path = tmp_path / "p.sqlite3"
    build_search_index(products, path, product_data_sha256="x")
    index = SearchIndex.open(path, cache_size=16)
    queries = [f"{a} {b}" for a in ("冰箱", "耳机静音", "水壶 宿舍", "枕头", "3号") for b in ("", "迷你", "办公 节能")]
    expected = {q: index.search_uncached(q) for q in queries}
    failures: list[str] = []
    barrier = threading.Barrier(8)

    def worker(offset: int) -> None:
        barrier.wait()
        for round_ in range(10):
            for i in range(len(queries)):
                query = queries[(i + offset) % len(queries)]
                got = index.search(query) if round_ % 2 else index.search_uncached(query)
                if got != expected[query]:
                    failures.append(query)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    index.close()
    with raises_kind(DataError, "search_unavailable", match="closed"):
        index.search("冰箱")


def test_an_index_replaced_on_disk_is_not_mixed_in(tmp_path):
    path = tmp_path / "p.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    index = SearchIndex.open(path)
    build_search_index(PRODUCTS[:1], path, product_data_sha256="other")  # atomic rename over the open index
    with raises_kind(DataError, "search_unavailable", match="replaced"):
        index.search("冰箱")


# -- docs/contract.md#search-evaluation evaluation ------------------------------------------------------------------------------------------


def test_retrieval_evaluation_over_an_explicit_task_list(index):
    tasks = [
        RetrievalQuery(1, "000000000001", "宿舍 冰箱", "宿舍小冰箱"),  # simple rank 1, full rank 1
        (2, "000000000003", "宿舍 冰箱", "迷你 冰箱 静音"),  # simple rank 2, full rank 1
        (3, "000000000002", "", "开放式耳机"),  # empty simple query falls back to the full one: rank 1
        (4, "000000000002", "冰箱", "xyz"),  # not retrieved
    ]
    report = evaluate_retrieval(index, tasks, split="test")
    assert report == {
        "search_version": "shopsimulator-multifield-bm25-v3",
        "product_data_sha256": "abc",
        "split": "test",
        "top_k": 150,
        "metrics": {
            "simple": {"queries": 4, "recall_at_1": 0.5, "recall_at_20": 0.75, "recall_at_150": 0.75,
                       "mrr_at_150": (1 + 0.5 + 1) / 4},
            "full": {"queries": 4, "recall_at_1": 0.75, "recall_at_20": 0.75, "recall_at_150": 0.75,
                     "mrr_at_150": 3 / 4},
        },
        "metric_scope": "Gold-ASIN retrieval proxy; alternatives may also be valid",
    }
    assert evaluate_retrieval(index, [], top_k=20)["metrics"]["simple"] == {
        "queries": 0, "recall_at_1": 0.0, "recall_at_20": 0.0, "mrr_at_20": 0.0,
    }
    with pytest.raises(ValueError, match="top_k"):
        evaluate_retrieval(index, tasks, top_k=19)
    with pytest.raises(ValueError, match="twice"):
        evaluate_retrieval(index, [tasks[1], tasks[1]])


def test_build_creates_parent_dirs_and_leaves_only_the_index(tmp_path):
    path = tmp_path / "deep" / "dir" / "products.sqlite3"
    build_search_index(PRODUCTS, path, product_data_sha256="abc")
    assert os.listdir(path.parent) == ["products.sqlite3"]
