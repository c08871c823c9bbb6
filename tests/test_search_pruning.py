"""The three summation paths of the in-memory ranking (``search._postings``), each against SQLite FTS5 itself:
every phrase summed over a reused per-row buffer, with its matched rows tracked (``summed``) or found by a pass
over all rows (``scanned``), and MaxScore pruning, which skips the rows that cannot reach the top k (``pruned``). Byte-identical hits for random token mixes at every k; pruning really leaves long postings unread;
score buffers are clean after queries of different sizes, dropped when a query fails half-way, and safe for
threads and a forked child; real instruction queries of the default catalog rank alike on every path."""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fork_support import in_forked_child
from shopsimrl.search import (
    SearchIndex,
    _postings,  # internals on purpose: the paths are what is tested
    build_search_index,
    search_tokens,
)
from shopsimrl.search._postings import Postings

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "default"
#: Zipf-like vocabulary: a few words in most products (long postings, small idf), many rare ones.
HAN = ["冰箱", "宿舍", "静音", "迷你", "耳机", "节能", "白色", "小熊", "单门", "数据线", "冰", "箱", "黑色", "加厚", "棉", "夏季"]
LATIN = ["usb-c", "usb", "c", "2.5l", "pro", "x-2", "a1", "max", "5v", "1.2", "xl", "m"]
WORDS = HAN + LATIN
WEIGHTS = [1.0 / (rank + 1) ** 1.1 for rank in range(len(WORDS))]
KS = [1, 2, 5, 20, 150, 1000]


def corpus(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)

    def words(low: int, high: int) -> str:
        picked = rng.choices(WORDS, WEIGHTS, k=rng.randint(low, high))
        return "".join(w if w in HAN else f" {w} " for w in picked)

    products = []
    for i in range(n):
        product = {
            "asin": f"B{rng.randrange(10**6):06d}{i:04d}",
            "title": words(2, 9), "brand": words(0, 1), "category": f"家电›{words(1, 2)}",
            "attribute": [words(1, 3) for _ in range(rng.randint(0, 3))],
            "customization_options": {"颜色": [{"value": words(1, 2), "price": 9}]} if rng.random() < 0.5 else {},
            "small_description": [words(1, 5) for _ in range(rng.randint(0, 2))],
        }
        products.append(product)
        if rng.random() < 0.15:  # identical twins: equal scores, ranked by ASIN
            products.append({**product, "asin": f"A{rng.randrange(10**6):06d}{i:04d}"})
    rng.shuffle(products)
    return products


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SearchIndex, SearchIndex]]:
    path = tmp_path_factory.mktemp("pruning") / "p.sqlite3"
    build_search_index(corpus(17, 900), path, product_data_sha256="x")
    fast, slow = SearchIndex.open(path), SearchIndex.open(path, accelerate=False)
    assert fast.backend == "postings", fast.backend_reason
    yield fast, slow
    fast.close()
    slow.close()


#: (_PRUNE_POSTINGS, _PRUNE_PER_K, _SCAN_RATIO, _ESTIMATE_FROM) that force every multi-phrase query onto one path;
#: ``pruned`` refines its threshold before every phrase, ``pruned-plain`` never.
MODES = {
    "summed": (10**12, 0, 0, 0), "scanned": (10**12, 0, 10**12, 0), "pruned": (0, 0, 0, 0),
    "pruned-plain": (0, 0, 0, 10**12),
}
_KNOBS = ("_PRUNE_POSTINGS", "_PRUNE_PER_K", "_SCAN_RATIO", "_ESTIMATE_FROM")


@contextlib.contextmanager
def path(mode: str) -> Iterator[None]:
    """Force every multi-phrase query onto one path (a key of MODES)."""
    saved = [getattr(_postings, knob) for knob in _KNOBS]
    for knob, value in zip(_KNOBS, MODES[mode], strict=True):
        setattr(_postings, knob, value)
    try:
        yield
    finally:
        for knob, value in zip(_KNOBS, saved, strict=True):
            setattr(_postings, knob, value)


def postings_of(index: SearchIndex) -> Postings:
    assert index.postings is not None
    return index.postings


def ranked(index: SearchIndex, tokens: tuple[str, ...], k: int, mode: str) -> list[tuple[str, float]] | None:
    with path(mode):
        result = postings_of(index).rank(tokens, k)
    return None if result is None else [(index.asin_of_rowid[rowid], score) for rowid, score in result]


def sqlite_ranked(slow: SearchIndex, tokens: tuple[str, ...], k: int) -> list[tuple[str, float]]:
    return [(asin, -bm25) for asin, bm25 in slow.raw_fts_query(tokens, k, contract_sql=True)]


def assert_all_zero_buffers(postings: Postings) -> None:
    assert len(postings._free_scores) <= _postings._FREE_SCORE_BUFFERS
    for scores in postings._free_scores:
        assert scores.shape == (postings.n_rows,) and not scores.any()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), k=st.sampled_from(KS))
def test_both_paths_rank_random_token_mixes_like_sqlite(pair, data, k):
    fast, slow = pair
    tokens = tuple(data.draw(st.lists(st.sampled_from([*WORDS, "zzz9", "想买"]), min_size=1, max_size=14)))
    expected = sqlite_ranked(slow, tokens, k)
    for mode in MODES:
        assert ranked(fast, tokens, k, mode) == expected, mode
    assert_all_zero_buffers(postings_of(fast))


def test_pruning_leaves_long_postings_unread_and_still_ranks_exactly(pair, monkeypatch):
    fast, slow = pair
    postings = postings_of(fast)
    added: list[int] = []
    original = Postings._add_phrase

    def counting(scores, phrase, *flags, **options):
        added.append(int(phrase.docs.size))
        return original(scores, phrase, *flags, **options)

    monkeypatch.setattr(Postings, "_add_phrase", staticmethod(counting))
    common = WORDS[:4]  # the most frequent words: long postings, small terms
    rare = WORDS[-3:]
    sizes = {word: int(postings._phrase(word).docs.size) for word in common + rare}
    assert min(sizes[w] for w in common) > 3 * max(sizes[w] for w in rare)
    skipped = 0
    for k in (1, 5, 20):
        for tokens in (tuple(common + rare), tuple(rare + common), (common[0], rare[0], common[1])):
            added.clear()
            assert ranked(fast, tokens, k, "pruned") == sqlite_ranked(slow, tokens, k)
            skipped += sum(sizes[w] for w in tokens) - sum(added)
    assert skipped > 0  # some long postings were never summed


def test_buffers_are_clean_after_queries_of_different_sizes(pair):
    fast, slow = pair
    postings = postings_of(fast)
    rng = random.Random(5)
    queries = [tuple(rng.sample(WORDS, n)) for n in (14, 1, 3, 20, 2, 9, 24, 4)]
    for mode in ("summed", "pruned", "scanned", "summed", "scanned"):
        for tokens in queries:
            for k in (3, 150):
                assert ranked(fast, tokens, k, mode) == sqlite_ranked(slow, tokens, k)
                assert_all_zero_buffers(postings)
    assert postings._free_scores  # a buffer is kept for the next query


def test_a_query_that_fails_half_way_drops_its_buffer(pair, monkeypatch):
    fast, slow = pair
    postings = postings_of(fast)
    tokens = tuple(WORDS[:10])
    expected = sqlite_ranked(slow, tokens, 1000)  # k = every row: no phrase is skipped
    original = Postings._add_phrase
    calls = []

    def failing(scores, phrase, *flags, **options):
        calls.append(1)
        result = original(scores, phrase, *flags, **options)
        if len(calls) == 2:  # after its rows were written: the buffer is dirty now
            raise MemoryError("simulated")
        return result

    for mode in MODES:
        calls.clear()
        postings._free_scores.clear()
        monkeypatch.setattr(Postings, "_add_phrase", staticmethod(failing))
        with pytest.raises(MemoryError):
            ranked(fast, tokens, 1000, mode)
        assert_all_zero_buffers(postings)
        monkeypatch.setattr(Postings, "_add_phrase", staticmethod(original))
        assert ranked(fast, tokens, 1000, mode) == expected


def test_threads_share_the_buffers_safely(pair):
    fast, slow = pair
    postings = postings_of(fast)
    rng = random.Random(9)
    queries = [(tuple(rng.sample(WORDS, rng.randint(2, 16))), rng.choice(KS)) for _ in range(40)]
    expected = [sqlite_ranked(slow, tokens, k) for tokens, k in queries]
    failures: list[str] = []

    def work(seed: int) -> None:
        order = list(range(len(queries)))
        random.Random(seed).shuffle(order)
        for i in order * 3:
            tokens, k = queries[i]
            result = postings.rank(tokens, k)
            if result is None or [(fast.asin_of_rowid[r], s) for r, s in result] != expected[i]:
                failures.append(f"{tokens} k={k}")

    for mode in MODES:
        with path(mode):  # set before the threads start: they read the module globals
            threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert not failures
    assert_all_zero_buffers(postings)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_ranks_with_the_inherited_buffers(pair):
    fast, slow = pair
    postings = postings_of(fast)
    queries = [(tuple(WORDS[i : i + 8]), 20) for i in range(0, 16, 2)]
    expected = [sqlite_ranked(slow, tokens, k) for tokens, k in queries]
    for tokens, k in queries:  # leave clean buffers in the free list for the child to inherit
        postings.rank(tokens, k)
    assert postings._free_scores

    def in_child() -> tuple[list[list[object]], bool]:
        results = [[ranked(fast, tokens, k, mode) for tokens, k in queries] for mode in MODES]
        return results, all(not scores.any() for scores in postings._free_scores)

    reply = in_forked_child(in_child)
    assert reply == ([expected] * len(MODES), True)


@pytest.mark.skipif(not (DEFAULT_DATA / "manifest.json").is_file(), reason="data/default is not built")
def test_default_catalog_instruction_queries_rank_alike_on_every_path():
    """Real queries (task instructions, product-name prefixes) on the stored postings of the default catalog."""
    from shopsimrl.catalog import Catalog

    catalog = Catalog.from_data_dir(DEFAULT_DATA)
    index = catalog.search_index
    assert index.postings is not None, index.backend_reason
    slow = SearchIndex.open(index.path, accelerate=False)
    try:
        task_ids = sorted(catalog.goals)[::40]
        texts = [catalog.goals[t]["instruction_text"] for t in task_ids]
        texts += [catalog.goals[t]["name"][:12] for t in task_ids]
        full_page_somewhere = False
        for i, text in enumerate(texts):
            tokens = search_tokens(text)
            summed = ranked(index, tokens, 150, "summed")
            assert summed is not None and ranked(index, tokens, 150, "pruned") == summed
            assert ranked(index, tokens, 150, "scanned") == summed
            assert ranked(index, tokens, 150, "pruned-plain") == summed
            assert ranked(index, tokens, 10, "pruned") == summed[:10]
            full_page_somewhere |= len(summed) == 150
            if i % 8 == 0:
                assert summed == sqlite_ranked(slow, tokens, 150)
        assert full_page_somewhere
        assert_all_zero_buffers(index.postings)
    finally:
        slow.close()
        index.close()


def test_the_buffer_dtype_and_size_follow_the_rows(pair):
    fast, _ = pair
    postings = postings_of(fast)
    ranked(fast, tuple(WORDS[:6]), 5, "summed")
    (scores, *_) = postings._free_scores
    assert scores.dtype == np.float64 and scores.size == postings.n_rows
