"""Memory stays within the documented cache budget (docs/service.md#memory-budget) whatever a client searches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsimrl.bounded_cache import ENTRY_OVERHEAD, MIB, PHRASE_BYTES, SEARCH_RESULT_BYTES, BoundedMemo

ROOT = Path(__file__).resolve().parents[1]


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 400)), max_size=200), st.integers(0, 3000))
@settings(max_examples=200, deadline=None)
def test_bounded_memo_never_holds_more_than_its_budget(calls, budget):
    computed: list[int] = []

    def fn(key: int, size: int) -> int:
        computed.append(key)
        return size

    memo = BoundedMemo(fn, maxsize=8, max_bytes=budget, size_of=lambda args, value: value, max_entry_bytes=budget)
    for key, size in calls:
        assert memo(key, size) == size
        info = memo.cache_info()
        assert info.bytes <= budget and info.currsize <= 8
    info = memo.cache_info()
    assert info.hits + info.misses == len(calls) and info.misses == len(computed)


def test_least_recently_used_goes_first():
    memo = BoundedMemo(lambda key: key, maxsize=100, max_bytes=3 * (10 + ENTRY_OVERHEAD), size_of=lambda a, v: 10,
                      max_entry_bytes=1000)
    for key in ("a", "b", "c"):
        memo(key)
    memo("a")  # now b is the oldest
    memo("d")
    before = memo.cache_info().misses
    memo("a"), memo("c"), memo("d")
    assert memo.cache_info().misses == before
    memo("b")
    assert memo.cache_info().misses == before + 1


def test_long_queries_are_charged_their_bytes(prepared_dir):
    from shopsimrl.search import SearchIndex
    from shopsimrl.search.text import search_tokens

    with SearchIndex.open(prepared_dir / "products.sqlite3", cache_bytes=4 * MIB) as index:
        for i in range(60):
            index.search_tokens(search_tokens(" ".join(f"w{i}x{j}" for j in range(6000))))
            assert index.cache_info().bytes <= 4 * MIB
        assert index.cache_info().currsize < 60  # old entries went


@pytest.mark.slow
def test_a_thousand_maximal_searches_stay_within_the_budget(prepared_dir):
    """1,000 distinct 64K-character searches (the action limit) through the service: the resident memory grows by
    at most the search caches' budget (with a quarter for the allocator), not by each query's size."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "memory_probe.py"), str(prepared_dir), "1000", "65536"],
                         capture_output=True, text=True, env=env, timeout=1800, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    budget_mb = (SEARCH_RESULT_BYTES + PHRASE_BYTES) / MIB
    print(f"RSS {figures['warm_mb']:.0f} MB after 20 queries -> {figures['end_mb']:.0f} MB after 1,000 "
          f"(search cache {figures['cache_bytes'] / MIB:.0f} MB in {figures['cache_entries']} entries)")
    assert figures["cache_bytes"] <= SEARCH_RESULT_BYTES
    assert figures["end_mb"] - figures["warm_mb"] <= 1.25 * budget_mb
