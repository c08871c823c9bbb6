"""A JSON-lines file read by record number (one positioned read each): random access without loading the file.

Why: a prepared catalog holds per-product page data and resolved goals for up to a million records; decoding
them all at open cost seconds and hundreds of megabytes per process. Here a record is read and decoded when it
is asked for, from the OS page cache that every process reading the same file shares.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..errors import DataError


class LineStore:
    """Records ``0..n-1`` of a JSON-lines file; ``offsets`` (n + 1 int64) delimit them, newline excluded.

    A record is read with one positioned read (``os.pread``: safe from many threads and in forked children, no
    shared file position): at a million products the records file is gigabytes and a result page reads ten
    records at random places in it, where a memory map paid a page fault, and mapped 16 pages, for each.
    """

    def __init__(self, path: Path, offsets: np.ndarray) -> None:
        self.path = path
        self.offsets = offsets
        self._file = open(path, "rb")  # noqa: SIM115 - kept open for reads until close()
        try:
            size = os.fstat(self._file.fileno()).st_size
            if offsets.size < 1 or int(offsets[-1]) != size:
                raise DataError(f"{path.name}: offsets end at {int(offsets[-1]) if offsets.size else 0}, file has {size} bytes", code="data_integrity")
        except BaseException:
            self._file.close()
            raise
        self._fd = self._file.fileno()

    def __len__(self) -> int:
        return int(self.offsets.size) - 1

    def raw(self, number: int) -> bytes:
        begin, end = self.offsets[number : number + 2].tolist()
        length = end - 1 - begin  # the trailing newline is not part of the record
        data = os.pread(self._fd, length, begin)
        if len(data) != length:
            raise DataError(f"{self.path.name}: record {number} is cut short (the file changed after opening)", code="data_integrity")
        return data

    def get(self, number: int) -> Any:
        """Record ``number``; a line that is not JSON (the file was edited after ``prepare``) is a
        ``DataError`` (``data_integrity``) naming it, whatever API asked for it."""
        try:
            return _decode(self.raw(number))
        except (ValueError, RecursionError) as exc:
            raise DataError(f"{self.path}: record {number} is not valid JSON ({exc}); the file was altered "
                                     "after `shopsimrl data prepare`: prepare it again with --force", code="data_integrity") from None

    def close(self) -> None:
        self._file.close()


def _decode(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # what orjson refuses but json writes (ints beyond 64 bits, NaN)
        return json.loads(data)


def iter_lines(path: Path, offsets: np.ndarray, block: int = 1 << 16) -> Iterator[Any]:
    """Records ``0..n-1`` in order, read through the file rather than a map.

    Why: a pass over a whole map leaves every page it touched mapped, and so counted in the process's memory,
    until the map closes (1.8 GB of records at 1.17M products); read pages stay in the OS cache only.
    """
    with open(path, "rb") as handle:
        for begin in range(0, max(int(offsets.size) - 1, 0), block):
            for length in np.diff(offsets[begin : begin + block + 1]).tolist():
                line = handle.readline()
                if len(line) != length or not line.endswith(b"\n"):
                    raise DataError(f"{path.name}: a record line differs from its offsets", code="data_integrity")
                yield _decode(line[:-1])
        if handle.read(1):
            raise DataError(f"{path.name}: the file goes on past its offsets", code="data_integrity")


def encode_record(record: Any) -> bytes:
    """Compact JSON, key order kept; newlines inside strings are escaped, so one record is one line."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class LineWriter:
    """Streams one encoded record per line into ``path`` (atomically, on ``finish``) and keeps the offsets."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temporary = path.with_name(path.name + ".building")
        self._handle = open(self.temporary, "wb")  # noqa: SIM115 - open across add() calls, closed by finish/abort
        self._offsets = array("q", [0])

    def add(self, record: bytes) -> None:
        if b"\n" in record:
            raise ValueError("a JSON-lines record must not contain a raw newline")
        self._handle.write(record)
        self._handle.write(b"\n")
        self._offsets.append(self._offsets[-1] + len(record) + 1)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def finish(self) -> np.ndarray:
        """Rename into place; returns the n + 1 offsets."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self.temporary, self.path)
        offsets: np.ndarray = np.frombuffer(self._offsets, dtype=np.int64).copy()
        return offsets

    def abort(self) -> None:
        self._handle.close()
        self.temporary.unlink(missing_ok=True)
