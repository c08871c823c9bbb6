"""The chunked postings build (``search._postings_build``, issue 14 item 2): any chunking gives the one-shot arrays.

The build tokenises a chunk of rows at a time, spills each chunk's term-sorted run and gathers the final arrays a
block of terms at a time; ``prepare`` writes them block by block into ``.npy`` files. Checked here: every chunk
size and term-block size (down to one row and one instance, so every boundary falls everywhere) gives arrays equal,
dtype and bits, to a one-shot build; spilled runs equal in-memory ones; the contributions equal what ``Postings``
computes itself; the streamed ``.npy`` files are byte for byte what ``np.save`` writes; what ``prepare`` stored
equals an in-memory rebuild; a build that fails its checks leaves no files; records are read back in order.
"""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shopsimrl.catalog._lazy import RECORDS_DIR, iter_product_records
from shopsimrl.catalog._line_store import LineStore, iter_lines
from shopsimrl.search import SearchIndex, build_search_index
from shopsimrl.search._postings import Postings  # internals on purpose: their arrays are what is compared
from shopsimrl.search._postings_build import BuiltPostings, MemorySink, build_postings
from shopsimrl.search._schema import DEFAULT_FIELD_WEIGHTS, FTS_COLUMNS, bm25_column_weights
from shopsimrl.search.stored import POSTINGS_ARRAYS, SEARCH_DIR, NpyFileSink, load_array
from test_search_postings import corpus

WEIGHTS = [bm25_column_weights(DEFAULT_FIELD_WEIGHTS)[c] for c in FTS_COLUMNS]
N_PRODUCTS = 90


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("chunked") / "p.sqlite3"
    build_search_index(corpus(3, N_PRODUCTS), path, product_data_sha256="x")
    return path


def _connection(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path)
    connection.execute("CREATE VIRTUAL TABLE temp.shopsimrl_vocab USING fts5vocab('main', 'products', 'row')")
    return connection


def _tie_rank(connection: sqlite3.Connection) -> dict[int, int]:
    rows = connection.execute("SELECT rowid, asin FROM products").fetchall()
    return {rowid: rank for rank, (rowid, _) in enumerate(sorted(rows, key=lambda row: row[1]))}


def _build(path: Path, spill_dir: Path | None = None, **sizes: int) -> tuple[dict[str, np.ndarray], BuiltPostings]:
    connection = _connection(path)
    try:
        sink = MemorySink()
        built = build_postings(connection, FTS_COLUMNS, WEIGHTS, _tie_rank(connection), sink, spill_dir=spill_dir,
                               **sizes)
        return sink.arrays, built
    finally:
        connection.close()


@pytest.fixture(scope="module")
def one_shot(index_path: Path) -> tuple[dict[str, np.ndarray], BuiltPostings]:
    return _build(index_path, doc_chunk=10**9, term_block=10**9)


def _assert_equal(arrays: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(arrays) == sorted(expected) == sorted(POSTINGS_ARRAYS)
    for name, array in expected.items():
        assert arrays[name].dtype == array.dtype and arrays[name].shape == array.shape, name
        assert arrays[name].tobytes() == array.tobytes(), name


def test_the_one_shot_build_is_a_real_catalog(one_shot: tuple[dict[str, np.ndarray], BuiltPostings]) -> None:
    """Enough rows, pairs with frequencies above one weight and ASCII positions for the chunkings to matter."""
    arrays, built = one_shot
    assert arrays["rowids"].size >= N_PRODUCTS and len(built.terms) > 20
    assert arrays["position_keys"].size > 50 and arrays["freq_values"].size > 5
    pairs = arrays["pair_docs"].size
    assert arrays["pair_offsets"][-1] == pairs and pairs < built.total_tokens  # some (term, row) pairs repeat


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc_chunk=st.integers(1, N_PRODUCTS + 40), term_block=st.integers(1, 4000))
def test_any_chunking_gives_the_one_shot_arrays(
    index_path: Path, one_shot: tuple[dict[str, np.ndarray], BuiltPostings], doc_chunk: int, term_block: int
) -> None:
    arrays, built = _build(index_path, doc_chunk=doc_chunk, term_block=term_block)
    _assert_equal(arrays, one_shot[0])
    assert built == one_shot[1]


def test_spilled_runs_equal_runs_kept_in_memory(
    index_path: Path, one_shot: tuple[dict[str, np.ndarray], BuiltPostings], tmp_path: Path
) -> None:
    arrays, built = _build(index_path, spill_dir=tmp_path, doc_chunk=7, term_block=50)
    _assert_equal(arrays, one_shot[0])
    assert built == one_shot[1] and not list(tmp_path.iterdir())  # the spill file is unlinked


def test_contributions_equal_what_postings_computes(one_shot: tuple[dict[str, np.ndarray], BuiltPostings]) -> None:
    arrays, built = one_shot
    own = {name: array for name, array in arrays.items() if name != "pair_contrib"}
    postings = Postings(
        rowids=own["rowids"], doc_lengths=own["doc_lengths"], total_tokens=built.total_tokens,
        term_ids={term: i for i, term in enumerate(built.terms)}, pair_offsets=own["pair_offsets"],
        pair_docs=own["pair_docs"], pair_freq_codes=own["pair_freq_codes"], freq_values=own["freq_values"],
        position_bounds=own["position_bounds"], position_keys=own["position_keys"], column_weights=WEIGHTS,
        tie_rank=own["tie_rank"],
    )
    assert postings.arrays()["pair_contrib"].tobytes() == arrays["pair_contrib"].tobytes()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(block=st.integers(1, 300))
def test_streamed_npy_files_are_what_np_save_writes(
    one_shot: tuple[dict[str, np.ndarray], BuiltPostings], tmp_path_factory: pytest.TempPathFactory, block: int
) -> None:
    directory = tmp_path_factory.mktemp("npy")
    sink = NpyFileSink(directory)
    for name, array in one_shot[0].items():
        writer = sink.open(name, array.dtype, array.shape)
        flat = array.reshape(-1)
        for begin in range(0, flat.size, block):
            writer.write(flat[begin : begin + block])
        writer.close()
        expected = io.BytesIO()
        np.save(expected, array, allow_pickle=False)
        assert sink.path(name).read_bytes() == expected.getvalue(), name
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"postings_{n}.npy" for n in POSTINGS_ARRAYS)


def test_a_short_or_overfull_array_is_refused_and_aborted(tmp_path: Path) -> None:
    sink = NpyFileSink(tmp_path)
    writer = sink.open("pair_docs", np.dtype(np.int32), (3,))
    with pytest.raises(ValueError, match="does not fit"):
        writer.write(np.zeros(4, dtype=np.int32))
    with pytest.raises(ValueError, match="does not fit"):
        writer.write(np.zeros(2, dtype=np.int64))
    writer.write(np.zeros(2, dtype=np.int32))
    with pytest.raises(ValueError, match="never written"):
        writer.close()
    sink.abort()
    assert not list(tmp_path.iterdir())


def test_what_prepare_stored_equals_an_in_memory_rebuild(prepared_dir: Path) -> None:
    with SearchIndex.open(prepared_dir / "products.sqlite3") as index:
        assert index.backend == "postings", index.backend_reason
        assert index.postings is not None
        rebuilt = index.postings.arrays()
    stored = {name: load_array(prepared_dir / SEARCH_DIR / f"postings_{name}.npy") for name in POSTINGS_ARRAYS}
    _assert_equal(stored, rebuilt)


def test_a_build_that_fails_its_checks_leaves_no_files(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    build_search_index(corpus(5, 20), path, product_data_sha256="x")
    connection = sqlite3.connect(path)
    connection.execute("UPDATE products SET title = 'USB 冰箱' WHERE rowid = 1")  # unicode61 folds; we refuse
    connection.commit()
    connection.close()
    stored = tmp_path / "search"
    stored.mkdir()
    with SearchIndex.open(path, accelerate=False) as index:
        assert index.store_postings(NpyFileSink(stored)) is None
        assert index.backend == "sqlite" and "not an FTS5 term" in index.backend_reason
    assert not list(stored.iterdir())


def _records(directory: Path) -> Iterator[object]:
    store = LineStore(directory / "products.jsonl", load_array(directory / "products_offsets.npy"))
    try:
        yield from (store.get(number) for number in range(len(store)))
    finally:
        store.close()


def test_records_read_in_order_equal_the_mapped_ones(prepared_dir: Path, tmp_path: Path) -> None:
    directory = prepared_dir / RECORDS_DIR
    assert list(iter_product_records(directory)) == list(_records(directory))
    offsets = load_array(directory / "products_offsets.npy")
    cut = tmp_path / "products.jsonl"
    cut.write_bytes((directory / "products.jsonl").read_bytes()[:-5])
    with pytest.raises(ValueError, match="differs from its offsets"):
        list(iter_lines(cut, offsets))
    longer = tmp_path / "longer.jsonl"
    longer.write_bytes((directory / "products.jsonl").read_bytes() + b"{}\n")
    with pytest.raises(ValueError, match="past its offsets"):
        list(iter_lines(longer, offsets))
