"""Products and goals of a prepared catalog, read and decoded on first use from files written by ``prepare``.

Why: opening used to parse the whole cleaned archive, re-validate every record, re-parse every budget and copy
every goal (seconds for the default catalog, minutes at a million products). ``prepare`` now writes the cleaned
records and the resolved goals as JSON lines with their offsets and lookup arrays; opening maps the arrays and a
record costs one read and one decode the first time it is used. Both mappings iterate in the order the eager dicts did
(archive order, goals in build order), so every consumer sees the same data.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..bounded_cache import PRODUCT_RECORD_BYTES, BoundedMemo
from ..contract import is_task_id
from ..errors import DataError
from ..search.stored import encode_asins, load_array, save_array
from ._line_store import LineStore, LineWriter, encode_record, iter_lines
from .record_checks import validate_records
from .records import Product

RECORDS_DIR = "records"
PRODUCTS_LINES = "products.jsonl"
PRODUCTS_OFFSETS = "products_offsets.npy"
PRODUCTS_ASINS = "products_asins.npy"
PRODUCTS_ORDER = "products_order.npy"
GOALS_LINES = "goals.jsonl"
GOALS_OFFSETS = "goals_offsets.npy"
GOALS_TASK_IDS = "goals_task_ids.npy"
GOALS_SLOTS = "goals_slots.npy"
#: Every file of ``records/`` the stores open.
RECORD_FILES = (PRODUCTS_LINES, PRODUCTS_OFFSETS, PRODUCTS_ASINS, PRODUCTS_ORDER, GOALS_LINES, GOALS_OFFSETS,
                GOALS_TASK_IDS, GOALS_SLOTS)
#: Products kept decoded per process (a page view keeps its own reference; this bounds the rest).
PRODUCT_CACHE_SIZE = 16384


class ProductStore(Mapping[str, Product]):
    """ASIN → ``Product``, decoded from the records file on first use (bounded cache)."""

    def __init__(self, directory: Path) -> None:
        self._lines = LineStore(directory / PRODUCTS_LINES, load_array(directory / PRODUCTS_OFFSETS))
        self._sorted_asins = load_array(directory / PRODUCTS_ASINS)
        self._order = load_array(directory / PRODUCTS_ORDER)
        if not (self._sorted_asins.size == self._order.size == len(self._lines)):
            raise ValueError("products: the record, ASIN and order arrays differ in length")
        self._source = str(directory / PRODUCTS_LINES)
        self.product_at = BoundedMemo(self._decode, maxsize=PRODUCT_CACHE_SIZE, max_bytes=PRODUCT_RECORD_BYTES,
                                      size_of=self._record_bytes)

    def _record_bytes(self, args: tuple[object, ...], _: Product) -> int:
        """A decoded record's memory, estimated from its JSON line (Python objects take ~4x the text)."""
        offsets = self._lines.offsets
        number = int(str(args[0]))
        return 4 * int(offsets[number + 1] - offsets[number]) + 512

    def _decode(self, number: int) -> Product:
        try:
            (product,) = validate_records([self._lines.get(number)], source=self._source)
        except DataError as exc:  # a record that no longer validates: the file was altered after prepare
            if exc.code != "archive":
                raise
            raise DataError(f"{exc}; the file was altered after `shopsimrl data prepare`: prepare it "
                                     "again with --force", code="data_integrity") from None
        return dataclasses.replace(product, index=number)

    def _number(self, asin: object) -> int:
        if not isinstance(asin, str):
            return -1
        try:
            key = np.array(asin.encode("utf-8"), dtype=self._sorted_asins.dtype)
        except UnicodeEncodeError:
            return -1
        if key.item() != asin.encode("utf-8"):  # longer than every stored ASIN (truncated) or ends in NUL
            return -1
        where = int(np.searchsorted(self._sorted_asins, key))
        if where < self._sorted_asins.size and self._sorted_asins[where] == key:
            return int(self._order[where])
        return -1

    def _known(self, asin: str) -> int:
        number = self._number(asin)
        if number < 0:
            raise KeyError(asin)
        return number

    def __getitem__(self, asin: str) -> Product:
        return self.product_at(self._known(asin))

    def record(self, asin: str) -> Mapping[str, Any]:
        """The stored archive record of ``asin`` as written by ``prepare`` (already validated there), decoded
        but not made into a ``Product``: what a result list shows is derived from the record alone."""
        record: Mapping[str, Any] = self._lines.get(self._known(asin))
        return record

    def __contains__(self, asin: object) -> bool:
        return self._number(asin) >= 0

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[str]:
        """ASINs in archive order, like the dict this replaces."""
        in_archive_order = np.empty_like(self._sorted_asins)
        in_archive_order[self._order] = self._sorted_asins
        return (bytes(item).decode("utf-8") for item in in_archive_order)

    def values(self) -> Iterator[Product]:  # type: ignore[override]
        return (self.product_at(number) for number in range(len(self)))


class GoalStore(Mapping[int, Mapping[str, Any]]):
    """task id → private goal, decoded on every lookup (a fresh dict: no caller can alter another's goal)."""

    def __init__(self, directory: Path) -> None:
        self._lines = LineStore(directory / GOALS_LINES, load_array(directory / GOALS_OFFSETS))
        self._task_ids = load_array(directory / GOALS_TASK_IDS)
        self._slots = load_array(directory / GOALS_SLOTS)
        if self._task_ids.size != len(self._lines):
            raise ValueError("goals: the record and task-id arrays differ in length")

    def _slot(self, task_id: object) -> int:
        if not is_task_id(task_id) or not 0 <= task_id < self._slots.size:
            return -1
        return int(self._slots[task_id])

    def __getitem__(self, task_id: int) -> Mapping[str, Any]:
        slot = self._slot(task_id)
        if slot < 0:
            raise KeyError(task_id)
        record = self._lines.get(slot)
        if not isinstance(record, dict) or record.get("task_id", task_id) != task_id:
            raise DataError(f"{self._lines.path}: record {slot} is not task {task_id}'s goal; the file was "
                                     "altered after `shopsimrl data prepare`: prepare it again with --force", code="data_integrity")
        goal: Mapping[str, Any] = record
        return goal

    def __contains__(self, task_id: object) -> bool:
        return self._slot(task_id) >= 0

    def __len__(self) -> int:
        return int(self._task_ids.size)

    def __iter__(self) -> Iterator[int]:
        return iter(self._task_ids.tolist())


class RecordsWriter:
    """Writes the cleaned product records (archive order) and resolved goals (build order) as they stream by,
    then their lookup arrays; ``finish`` returns the file names relative to the data directory."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._products = LineWriter(directory / PRODUCTS_LINES)
        self._goals = LineWriter(directory / GOALS_LINES)
        self._asins: list[str] = []
        self._task_ids = array("q")

    def add_product(self, asin: str, encoded: bytes) -> None:
        """``encoded``: the record's canonical JSON (``encode_record`` of it, or the cleaned archive's text)."""
        self._asins.append(asin)
        self._products.add(encoded)

    def add_goal(self, task_id: int, goal: Mapping[str, Any]) -> None:
        self._task_ids.append(task_id)
        self._goals.add(encode_record(goal))

    def finish(self) -> list[str]:
        directory = self.directory
        offsets = self._products.finish()
        order = np.argsort(np.asarray(self._asins, dtype=object), kind="stable").astype(np.int64)
        save_array(directory / PRODUCTS_OFFSETS, offsets)
        save_array(directory / PRODUCTS_ASINS, encode_asins([self._asins[i] for i in order.tolist()]))
        save_array(directory / PRODUCTS_ORDER, order)
        self._asins = []
        goal_offsets = self._goals.finish()
        task_ids = np.frombuffer(self._task_ids, dtype=np.int64).copy()
        slots = np.full(int(task_ids.max(initial=-1)) + 1, -1, dtype=np.int64)
        slots[task_ids] = np.arange(task_ids.size, dtype=np.int64)
        save_array(directory / GOALS_OFFSETS, goal_offsets)
        save_array(directory / GOALS_TASK_IDS, task_ids)
        save_array(directory / GOALS_SLOTS, slots)
        names = (PRODUCTS_LINES, PRODUCTS_OFFSETS, PRODUCTS_ASINS, PRODUCTS_ORDER,
                 GOALS_LINES, GOALS_OFFSETS, GOALS_TASK_IDS, GOALS_SLOTS)
        return [f"{directory.name}/{name}" for name in names]

    def abort(self) -> None:
        self._products.abort()
        self._goals.abort()


def iter_product_records(directory: Path) -> Iterator[Any]:
    """The stored product records in archive order, read sequentially (for building the index from disk)."""
    yield from iter_lines(directory / PRODUCTS_LINES, load_array(directory / PRODUCTS_OFFSETS))
