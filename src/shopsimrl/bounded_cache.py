"""A least-recently-used memo bounded by bytes as well as by entries (docs/service.md#memory-budget).

Why not ``functools.lru_cache``: its bound is a count, and a count does not bound memory when a client
chooses the keys. One 64K-character search is a key of thousands of tokens, so 65,536 such keys can hold
gigabytes. Each entry here is charged an estimate of its key's and value's bytes (``size_of``); the least
recently used entries go once the total passes ``max_bytes``, and an entry larger than ``max_entry_bytes``
is computed but never kept. Thread-safe: a lock guards the table, never the computation.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, NamedTuple, TypeVar

V = TypeVar("V")

#: Bytes charged per entry on top of its key and value (the table slot, the OrderedDict link, the size).
ENTRY_OVERHEAD = 160

MIB = 1 << 20
# The memory budget of one process's caches (docs/service.md#memory-budget); each is also bounded by entries.
SEARCH_RESULT_BYTES = 128 * MIB  #: ranked result lists, keyed by the query's tokens (search/_index.py)
PHRASE_BYTES = 32 * MIB  #: postings of multi-word query phrases (search/_postings.py)
PRODUCT_RECORD_BYTES = 64 * MIB  #: decoded product records (catalog/_lazy.py)
PRODUCT_VIEW_BYTES = 64 * MIB  #: product page data shared by every session (env/shop_env.py)
ITEM_TEXT_BYTES = 16 * MIB  #: rendered result-list items (env/_observation.py)
FUZZY_BYTES = 8 * MIB  #: fuzzy attribute ratios (env/fuzzy.py)
#: Parsed run traces of the replay UI are bounded by their files' bytes (server/replay.py).
TRACE_FILE_BYTES = 32 * MIB
#: Everything above: what the caches of a ``serve`` process can hold at most, whatever its clients send.
CACHE_BUDGET_BYTES = (SEARCH_RESULT_BYTES + PHRASE_BYTES + PRODUCT_RECORD_BYTES + PRODUCT_VIEW_BYTES
                      + ITEM_TEXT_BYTES + FUZZY_BYTES + 3 * TRACE_FILE_BYTES)  # a parsed trace is ~2.5x its file


class CacheInfo(NamedTuple):
    """``functools.lru_cache``'s four fields, and the byte figures."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    bytes: int = 0
    max_bytes: int = 0


def text_bytes(value: str) -> int:
    """``sys.getsizeof`` of a str, without calling it (a 64K-character string is measured in O(1))."""
    return sys.getsizeof(value)


def strings_bytes(values: Iterable[Any]) -> int:
    """Bytes of a tuple/list of strings (or other small objects) and its items."""
    items = list(values) if not isinstance(values, (tuple, list)) else values
    return sys.getsizeof(items) + sum(sys.getsizeof(item) for item in items)


class BoundedMemo(Generic[V]):
    """``fn(*args)`` memoised, least recently used first out, within ``maxsize`` entries and ``max_bytes``.

    ``size_of(args, value)`` estimates the bytes an entry keeps alive (its key and value); it is called once
    per miss. The call interface mirrors ``lru_cache``: ``cache_info()`` and ``cache_clear()``.
    """

    def __init__(self, fn: Callable[..., V], *, maxsize: int, max_bytes: int,
                 size_of: Callable[[tuple[Any, ...], V], int], max_entry_bytes: int | None = None) -> None:
        self._fn = fn
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_bytes // 8 if max_entry_bytes is None else max_entry_bytes
        self._size_of = size_of
        self._table: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> V:
        with self._lock:
            found = self._table.get(args)
            if found is not None:
                self._table.move_to_end(args)
                self._hits += 1
                return found[0]
            self._misses += 1
        value = self._fn(*args)
        size = self._size_of(args, value) + ENTRY_OVERHEAD
        if size > self.max_entry_bytes or self.maxsize <= 0:
            return value
        with self._lock:
            previous = self._table.pop(args, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._table[args] = (value, size)
            self._bytes += size
            while self._table and (self._bytes > self.max_bytes or len(self._table) > self.maxsize):
                _, (_, dropped) = self._table.popitem(last=False)
                self._bytes -= dropped
        return value

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._table), self._bytes, self.max_bytes)

    def cache_clear(self) -> None:
        with self._lock:
            self._table.clear()
            self._bytes = 0
            self._hits = self._misses = 0
