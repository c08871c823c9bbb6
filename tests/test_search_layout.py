"""The index split by job, tested where it matters: one read-only connection per open, the postings check
leaves that connection read-only, one SHA-256 helper, one result cache between the environment and SQLite.

These tests reach into private modules on purpose (connection counting, the pool)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl import hashing
from shopsimrl.catalog import archive
from shopsimrl.env import ShopWorld
from shopsimrl.search import SearchIndex, build_search_index, evaluate_retrieval, search_tokens
from shopsimrl.search import _pool as pool_module

PRODUCTS = [
    {"asin": f"{i:012d}", "title": f"{['冰箱', '耳机', '水壶'][i % 3]}{['静音', '节能'][i % 2]}款{i % 5}号",
     "attribute": [["宿舍", "办公"][i % 2]]}
    for i in range(60)
]


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, dict]:
    path = tmp_path / "p.sqlite3"
    return path, build_search_index(PRODUCTS, path, product_data_sha256="x")


@pytest.fixture
def opened_connections(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    opened: list[sqlite3.Connection] = []
    real = pool_module.read_only_connection

    def counting(path):
        opened.append(real(path))
        return opened[-1]

    monkeypatch.setattr(pool_module, "read_only_connection", counting)
    return opened


@pytest.mark.parametrize("accelerate", [True, False])
def test_open_uses_one_read_only_connection_for_checks_postings_and_queries(built, opened_connections, accelerate):
    path, _ = built
    with SearchIndex.open(path, accelerate=accelerate) as index:
        assert index.backend == ("postings" if accelerate else "sqlite"), index.backend_reason
        assert len(opened_connections) == 1
        index.raw_fts_query(("冰箱",), 5)
        assert index.search_uncached("冰箱 静音")
        assert len(opened_connections) == 1  # the connection the checks used is the pooled one


def test_the_postings_check_leaves_the_pooled_connection_read_only(built):
    path, _ = built
    with SearchIndex.open(path, accelerate=True) as index:
        assert index.backend == "postings", index.backend_reason
        with index._pool.connection() as connection:
            assert connection.execute("PRAGMA query_only").fetchone() == (1,)
            assert connection.execute("SELECT name FROM temp.sqlite_master").fetchall() == []
            with pytest.raises(sqlite3.OperationalError):
                connection.execute("CREATE TEMP TABLE t(x)")
            with pytest.raises(sqlite3.OperationalError):
                connection.execute("DELETE FROM manifest")


def test_a_file_replaced_while_opening_is_refused(built, tmp_path, monkeypatch):
    from shopsimrl.errors import DataError

    path, _ = built
    other = tmp_path / "other.sqlite3"
    build_search_index(PRODUCTS[:10], other, product_data_sha256="x")
    real = pool_module.read_only_connection

    def replace_then_open(target):
        other.replace(path)  # a rebuild renamed over the index between the identity and the connection
        return real(target)

    monkeypatch.setattr(pool_module, "read_only_connection", replace_then_open)
    with raises_kind(DataError, "search_unavailable", match="replaced or removed"):
        SearchIndex.open(path)


def test_one_sha256_helper(built):
    path, manifest = built
    assert archive.file_sha256 is hashing.file_sha256 and archive.sha256_hex is hashing.sha256_hex
    assert manifest["index_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() == hashing.file_sha256(path)


def test_the_environment_search_passes_one_cache(prepared_dir):
    world = ShopWorld.from_data_dir(prepared_dir)
    index = world.catalog.search_index
    assert index.cache_info().maxsize == 65536  # the bound the environment's own cache had
    query = world.catalog.goals[min(world.catalog.goals)]["name"][:12]
    before = index.cache_info()
    first = world.search(query)
    assert index.cache_info().misses == before.misses + 1
    again = world.search(query)
    assert again == first and index.cache_info().hits == before.hits + 1  # no cache in front of the index's
    assert again is first  # sessions share the cached ASIN tuple instead of holding copies
    assert first == index.result_asins(search_tokens(query)) == tuple(h.asin for h in index.search_tokens(search_tokens(query)))
    assert first == tuple(hit.asin for hit in index.search_uncached(query))
    assert search_tokens(query) and not hasattr(world.search, "cache_info")
    world.catalog.close()


def test_retrieval_evaluation_does_not_fill_the_result_cache(built):
    path, _ = built
    with SearchIndex.open(path) as index:
        queries = [(i, f"{i:012d}", "" if i % 2 else "冰箱 静音", f"想买{i % 5}号水壶") for i in range(20)]
        report = evaluate_retrieval(index, queries)
        assert index.cache_info().currsize == 0
        ranks = [next((h.rank for h in index.search(q, k=150) if h.asin == gold), None) for _, gold, _, q in queries]
        assert len(set(ranks)) > 1  # the metric below is not a constant
        expected_mrr = sum(1.0 / r for r in ranks if r is not None) / len(queries)
        assert report["metrics"]["full"]["mrr_at_150"] == pytest.approx(expected_mrr)
