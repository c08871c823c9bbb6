"""The search structures in their stored form: ``.npy`` arrays written by ``prepare``, memory-mapped at open.

Why: rebuilding the postings from SQLite's stored columns at every open cost seconds on the default catalog and
minutes at a million products, and every worker process held its own copy. Written once by ``prepare`` (after
the rebuilt postings passed the full query-sample check against SQLite) and memory-mapped read-only, they open
in milliseconds and the OS shares their pages between processes. The rowid → ASIN map is stored too, as a
fixed-width byte array in rowid order, so that no million-entry dict is built at open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._postings import Postings

#: Version of the stored search layout (file names, dtypes, meta keys); part of the data-directory manifest.
STORED_SEARCH_VERSION = "shopsimrl-stored-search-v1"
SEARCH_DIR = "search"
ASINS_FILE = "asins.npy"
ROWIDS_FILE = "rowids.npy"
TERMS_FILE = "terms.json"
POSTINGS_ARRAYS = (
    "rowids", "doc_lengths", "pair_offsets", "pair_docs", "pair_freq_codes", "freq_values", "position_bounds",
    "position_keys", "tie_rank", "pair_contrib",
)


class AsinColumn(Mapping[int, str]):
    """rowid → ASIN over two arrays (rowids ascending, UTF-8 ASINs), without a per-row Python object."""

    def __init__(self, rowids: np.ndarray, asins: np.ndarray) -> None:
        self.rowids = rowids
        self.asins = asins
        n = int(rowids.size)
        #: rowids 1..n (what our builder writes): a rowid is its position plus one, no search needed.
        self._dense = n > 0 and int(rowids[0]) == 1 and int(rowids[-1]) == n

    def _position(self, rowid: int) -> int:
        if self._dense:
            if 1 <= rowid <= self.rowids.size:
                return rowid - 1
            raise KeyError(rowid)
        where = int(np.searchsorted(self.rowids, rowid))
        if where < self.rowids.size and int(self.rowids[where]) == rowid:
            return where
        raise KeyError(rowid)

    def __getitem__(self, rowid: int) -> str:
        return bytes(self.asins[self._position(rowid)]).decode("utf-8")

    def many(self, rowids: list[int]) -> list[str]:
        """The ASINs of several rowids at once (one array gather instead of a lookup each)."""
        if self._dense:
            positions = np.asarray(rowids, dtype=np.int64) - 1
        else:
            positions = np.searchsorted(self.rowids, np.asarray(rowids, dtype=np.int64))
        return [item.decode("utf-8") for item in self.asins[positions].tolist()]

    def __iter__(self) -> Iterator[int]:
        return iter(self.rowids.tolist())

    def __len__(self) -> int:
        return int(self.rowids.size)

    def is_ascending(self) -> bool:
        """True when ASINs strictly increase with rowid (UTF-8 byte order is ``str`` order)."""
        return bool(self.asins.size < 2 or np.all(self.asins[:-1] < self.asins[1:]))


def save_array(path: Path, array: np.ndarray) -> None:
    temporary = path.with_name(path.name + ".building")
    with open(temporary, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def load_array(path: Path) -> np.ndarray:
    # np.asarray drops the memmap subclass (its per-operation overhead) but keeps the mapping.
    return np.asarray(np.load(path, mmap_mode="r", allow_pickle=False))


def encode_asins(asins: list[str]) -> np.ndarray:
    """Fixed-width UTF-8 bytes; numpy drops trailing NULs, so an ASIN ending in NUL cannot be stored."""
    encoded = [asin.encode("utf-8") for asin in asins]
    if any(item.endswith(b"\0") for item in encoded):
        raise ValueError("an ASIN ending in a NUL character cannot be stored")
    width = max((len(item) for item in encoded), default=1) or 1
    return np.array(encoded, dtype=f"S{width}")


def postings_file(directory: Path, name: str) -> Path:
    """Where the stored postings array ``name`` lives."""
    return directory / f"postings_{name}.npy"


class NpyFileSink:
    """Arrays written block by block into ``<directory>/postings_<name>.npy``, byte for byte what ``np.save`` of the
    whole array writes (same header), each through ``.building`` and renamed into place when complete.

    Why: ``prepare`` then never holds a whole postings array in memory, nor maps one while writing it.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._writers: list[_NpyWriter] = []

    def path(self, name: str) -> Path:
        return postings_file(self.directory, name)

    def open(self, name: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> _NpyWriter:
        writer = _NpyWriter(self.path(name), dtype, shape)
        self._writers.append(writer)
        return writer

    def abort(self) -> None:
        """Remove every file this sink wrote or began."""
        for writer in self._writers:
            writer.abort()
        self._writers = []


class _NpyWriter:
    def __init__(self, path: Path, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self._left = int(np.prod(shape, dtype=np.int64))
        self._temporary = path.with_name(path.name + ".building")
        self._handle = open(self._temporary, "wb")  # noqa: SIM115 - open across write() calls, closed by close/abort
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": tuple(int(n) for n in shape)}
        np.lib.format.write_array_header_1_0(self._handle, header)  # what np.save picks for such a header

    def write(self, block: np.ndarray) -> None:
        if block.dtype != self.dtype or block.size > self._left:
            raise ValueError(f"{self.path.name}: a block of {block.size} {block.dtype} does not fit")
        self._handle.write(np.ascontiguousarray(block).data)
        self._left -= int(block.size)

    def close(self) -> None:
        if self._left:
            raise ValueError(f"{self.path.name}: {self._left} values were never written")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self._temporary, self.path)

    def abort(self) -> None:
        self._handle.close()
        self._temporary.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)


def save_search_arrays(
    directory: Path, asin_of_rowid: Mapping[int, str], store_postings: Callable[[NpyFileSink], Postings | None]
) -> tuple[dict[str, Any], list[str]]:
    """Write the stored form into ``directory``; returns its meta (for the manifest) and the relative file names.

    ``store_postings`` writes the postings arrays through the sink it is given and returns them (memory-mapped),
    or returns None having removed what it wrote (the index then ranks with SQLite after opening too).
    """
    directory.mkdir(parents=True, exist_ok=True)
    rowids = sorted(asin_of_rowid)
    names = [ROWIDS_FILE, ASINS_FILE]
    save_array(directory / ROWIDS_FILE, np.asarray(rowids, dtype=np.int64))
    save_array(directory / ASINS_FILE, encode_asins([asin_of_rowid[r] for r in rowids]))
    del rowids
    meta: dict[str, Any] = {"version": STORED_SEARCH_VERSION, "rows": len(asin_of_rowid), "postings": None}
    sink = NpyFileSink(directory)
    postings = store_postings(sink)
    if postings is not None:
        names += [sink.path(name).name for name in POSTINGS_ARRAYS]
        terms = (json.dumps(postings.terms, ensure_ascii=False) + "\n").encode("utf-8")
        temporary = directory / (TERMS_FILE + ".building")
        temporary.write_bytes(terms)
        os.replace(temporary, directory / TERMS_FILE)
        names.append(TERMS_FILE)
        meta["postings"] = {
            "total_tokens": postings.total_tokens,
            "column_weights": list(postings.column_weights),
            "terms": len(postings.terms),
        }
    return meta, [f"{directory.name}/{name}" for name in names]


def load_asin_column(directory: Path) -> AsinColumn:
    return AsinColumn(load_array(directory / ROWIDS_FILE), load_array(directory / ASINS_FILE))


def load_postings(directory: Path, meta: Mapping[str, Any]) -> Postings | None:
    """The stored postings, memory-mapped; ``None`` when ``prepare`` kept this index on SQLite."""
    info = meta.get("postings")
    if not info:
        return None
    arrays = {name: load_array(postings_file(directory, name)) for name in POSTINGS_ARRAYS}
    terms = json.loads((directory / TERMS_FILE).read_text("utf-8"))
    if len(terms) != info["terms"] or arrays["rowids"].size != meta["rows"]:
        raise ValueError("stored postings do not match their meta (terms or rows)")
    check_postings_shapes(arrays, len(terms))
    return Postings.from_arrays(arrays, terms, int(info["total_tokens"]), [float(w) for w in info["column_weights"]])


def check_postings_shapes(arrays: Mapping[str, np.ndarray], n_terms: int) -> None:
    """Refuse arrays that do not fit together (``ValueError``): a file cut or edited after ``prepare``, with its
    manifest rewritten to match, would otherwise give wrong rankings or an IndexError for some queries only.

    Linear in the postings (two passes over the pair arrays), once per process at open."""
    rows = arrays["rowids"].size
    offsets = arrays["pair_offsets"]
    pairs = arrays["pair_docs"].size
    problems = []
    if arrays["doc_lengths"].size != rows or arrays["tie_rank"].size != rows:
        problems.append("per-row arrays differ in length")
    if offsets.size != n_terms + 1 or (offsets.size and (int(offsets[0]) != 0 or int(offsets[-1]) != pairs)):
        problems.append("pair offsets do not span the pairs")
    elif offsets.size > 1 and bool((np.diff(offsets) < 0).any()):
        problems.append("pair offsets decrease")
    if arrays["pair_freq_codes"].size != pairs or arrays["pair_contrib"].size != pairs:
        problems.append("per-pair arrays differ in length")
    elif pairs and (int(arrays["pair_docs"].min()) < 0 or int(arrays["pair_docs"].max()) >= rows):
        problems.append("a pair names a row that does not exist")
    elif pairs and int(arrays["pair_freq_codes"].max()) >= arrays["freq_values"].size:
        problems.append("a pair names a frequency that does not exist")
    bounds = arrays["position_bounds"]
    if bounds.shape != (n_terms, 2):
        problems.append("position bounds do not have one row per term")
    elif bounds.size and (int(bounds.min()) < 0 or int(bounds.max()) > arrays["position_keys"].size
                          or bool((bounds[:, 0] > bounds[:, 1]).any())):
        problems.append("position bounds leave the position keys")
    if problems:
        raise ValueError("stored postings are inconsistent: " + "; ".join(problems))
