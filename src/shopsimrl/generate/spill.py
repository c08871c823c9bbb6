"""Where generated products wait for their archive position (generation with bounded memory).

The generator makes products leaf by leaf (one seeded stream per leaf) but the archive lists them in a
shuffled order, and persona tasks read a few same-leaf siblings. Holding every draft until the end cost
~6 KB per product (7.3 GB at 1.17M products), so ``SpillStore`` pickles each item to an unlinked temporary
file as soon as it is made and reads it back by position (``os.pread``); memory keeps only 12 bytes of
offset and length per product. Vocabulary objects (the ``Vocabulary``, its leaves, slots and axes) are
pickled as references (an index), so every read gives a fresh, equal copy that still points at the shared vocabulary.
``MemoryStore`` keeps the objects themselves: the reference the tests compare the spilled output with.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import tempfile
from array import array
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from .vocabulary import Vocabulary

T = TypeVar("T")


class DraftStore(Protocol[T]):
    """Items by position: each position is put once, then read any number of times."""

    def put(self, position: int, item: T) -> None: ...

    def get(self, position: int) -> T: ...

    def close(self) -> None: ...


class MemoryStore(Generic[T]):
    """Every item in a list (small catalogs, tests, ``build_catalog``)."""

    def __init__(self, size: int) -> None:
        self._items: list[T | None] = [None] * size

    def put(self, position: int, item: T) -> None:
        self._items[position] = item

    def get(self, position: int) -> T:
        item = self._items[position]
        if item is None:
            raise KeyError(position)
        return item

    def close(self) -> None:
        self._items = []


def _shared_objects(vocab: Vocabulary) -> list[object]:
    """The vocabulary objects that drafts point at; they are pickled as their index in this list."""
    shared: list[object] = [vocab]
    for leaf in vocab.leaves:
        shared.append(leaf)
        shared.extend(leaf.slots)
        shared.extend(leaf.axes)
    return shared


_SHARED: dict[int, list[object]] = {}
"""Open stores' shared objects by store token (pickles name a token and an index, never the object)."""


def _shared(token: int, index: int) -> object:
    return _SHARED[token][index]


class _Pickler(pickle.Pickler):
    """Pickles the shared vocabulary objects by reference through a ``dispatch_table`` (the C pickler calls
    back into Python only for instances of their classes, not for every object as ``persistent_id`` would)."""

    def __init__(self, buffer: io.BytesIO, token: int, index: dict[int, int]) -> None:
        super().__init__(buffer, protocol=pickle.HIGHEST_PROTOCOL)

        def reduce(obj: object) -> str | tuple[object, ...]:
            position = index.get(id(obj))
            if position is None:
                return object.__reduce_ex__(obj, pickle.HIGHEST_PROTOCOL)
            return _shared, (token, position)

        table: dict[type, Callable[[Any], Any]] = dict(copyreg.dispatch_table)
        for kind in {type(obj) for obj in _SHARED[token]}:
            table[kind] = reduce
        self.dispatch_table = table


class SpillStore(Generic[T]):
    """Items pickled to an unlinked temporary file in ``folder`` (removed by the OS even after a crash)."""

    def __init__(self, size: int, vocab: Vocabulary, folder: str | os.PathLike[str] | None = None) -> None:
        self._token = id(self)
        _SHARED[self._token] = shared = _shared_objects(vocab)
        self._index = {id(obj): i for i, obj in enumerate(shared)}
        buffer = io.BytesIO()
        self._buffer = buffer
        self._pickler = _Pickler(buffer, self._token, self._index)
        self._offsets = array("q", bytes(8 * size))
        self._lengths = array("i", [-1]) * size
        self._file = tempfile.TemporaryFile(dir=folder, prefix="shopsimrl-generate-", suffix=".spill")  # noqa: SIM115 (closed by close())
        self._end = 0

    def put(self, position: int, item: T) -> None:
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        self._pickler.clear_memo()  # each item must unpickle on its own
        self._pickler.dump(item)
        data = buffer.getvalue()
        self._file.write(data)
        self._offsets[position] = self._end
        self._lengths[position] = len(data)
        self._end += len(data)

    def get(self, position: int) -> T:
        length = self._lengths[position]
        if length < 0:
            raise KeyError(position)
        self._file.flush()  # a no-op once writing is over
        data = os.pread(self._file.fileno(), length, self._offsets[position])
        item: T = pickle.loads(data)
        return item

    def close(self) -> None:
        self._file.close()
        _SHARED.pop(self._token, None)
