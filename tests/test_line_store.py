"""The records store (``catalog._line_store``): records written by ``LineWriter`` read back by number with
positioned reads, the same from many threads at once and in a forked child; an empty file; a file cut after
opening fails with a message naming it instead of returning part of a record."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from error_kinds import raises_kind
from fork_support import in_forked_child
from shopsimrl.catalog._line_store import LineStore, LineWriter, encode_record  # internals on purpose
from shopsimrl.errors import DataError


def records(n: int) -> list[dict]:
    rng = random.Random(n)
    return [{"asin": f"B{i:05d}", "title": "冰箱" * rng.randint(0, 40), "line": "a\nb", "n": rng.random()}
            for i in range(n)]


def written(path: Path, items: list[dict]) -> LineStore:
    writer = LineWriter(path)
    for item in items:
        writer.add(encode_record(item))
    return LineStore(path, writer.finish())


def test_records_read_back_in_any_order_and_from_threads(tmp_path: Path) -> None:
    items = records(500)
    store = written(tmp_path / "r.jsonl", items)
    assert len(store) == 500 and store.get(499) == items[499] and store.get(0) == items[0]
    failures: list[int] = []

    def read(seed: int) -> None:
        order = list(range(500))
        random.Random(seed).shuffle(order)
        failures.extend(number for number in order if store.get(number) != items[number])

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_reads_the_same_records(tmp_path: Path) -> None:
    items = records(50)
    store = written(tmp_path / "r.jsonl", items)
    assert store.get(3) == items[3]
    reply = in_forked_child(lambda: [store.get(number) for number in reversed(range(50))])
    assert reply == items[::-1]
    assert store.get(49) == items[49]  # the parent's reads are unaffected (no shared file position)


def test_an_empty_store(tmp_path: Path) -> None:
    store = written(tmp_path / "empty.jsonl", [])
    assert len(store) == 0
    store.close()


def test_a_file_cut_after_opening_is_reported_not_half_read(tmp_path: Path) -> None:
    items = records(20)
    path = tmp_path / "r.jsonl"
    store = written(path, items)
    with open(path, "r+b") as handle:
        handle.truncate(int(store.offsets[10]) + 5)
    assert store.get(9) == items[9]
    with raises_kind(DataError, "data_integrity", match=r"r\.jsonl: record 10 is cut short"):
        store.raw(10)
    store.close()


def test_offsets_that_do_not_end_at_the_file_size_are_refused(tmp_path: Path) -> None:
    store = written(tmp_path / "r.jsonl", records(5))
    offsets = store.offsets.copy()
    store.close()
    offsets[-1] += 1
    with raises_kind(DataError, "data_integrity", match="offsets end at"):
        LineStore(tmp_path / "r.jsonl", offsets)
