"""A prepared data directory opened for use: products, goals, splits and the search index, loaded once.

One ``Catalog`` per process is shared read-only by every session; opening checks the data against the
manifest so a stale index or an edited archive is refused instead of silently giving other results.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import DatasetBuildError, SplitError, UnknownTaskError
from ..jsonfile import read_json_file
from ..search import DEFAULT_FIELD_WEIGHTS, SearchIndex
from .archive import parse_archive_json, read_archive_bytes, sha256_hex, validate_records
from .goals import build_goals
from .prepare import INDEX_FILE, MANIFEST_FILE, PERSONA_SPLITS_FILE, PRODUCTS_FILE, TASK_SPLITS_FILE
from .records import Product

SPLIT_ALIASES = {"validation": "val", "persona_test": "test", "persona_val": "val", "persona_train": "train"}


def _not_prepared(path: Path) -> str:
    return (
        f"{path} is not a prepared data directory (no {MANIFEST_FILE}); build the default catalog with "
        f"`shopsimrl data build-default --out {path}` (or `make run`, which builds data/default), or prepare "
        "a real archive with `shopsimrl data prepare --archive FILE --out DIR`"
    )


def check_data_dir(root: str | os.PathLike[str], split: str | None = None) -> bool | None:
    """The cheap checks of a data directory and a split name, from two small JSON files; returns the
    split's declared persona mode (None: mixed or no split given).

    Opening a catalog takes seconds (archive, goals, index); a typo in a path or a split name must be
    reported before that, not after.
    """
    path = Path(root)
    if not (path / MANIFEST_FILE).exists():
        raise DatasetBuildError(_not_prepared(path))
    if split is None:
        return None
    splits = read_json_file(path / TASK_SPLITS_FILE).get("splits")
    if not isinstance(splits, Mapping):
        raise DatasetBuildError(f"{path}: cannot read {TASK_SPLITS_FILE}: it has no 'splits' object")
    if SPLIT_ALIASES.get(split, split) not in splits:
        raise SplitError(f"unknown task split {split!r}; choose one of: {', '.join(sorted(splits))}")
    declared = splits[SPLIT_ALIASES.get(split, split)]
    return declared.get("persona") if isinstance(declared, Mapping) else None


@dataclass
class Catalog:
    """Everything an episode needs from the data, shared by all sessions of a process."""

    root: Path
    manifest: Mapping[str, Any]
    products: tuple[Product, ...]
    goals: Mapping[int, Mapping[str, Any]]
    task_splits: Mapping[str, Any]
    persona_splits: Mapping[str, Any]
    _search: SearchIndex | None = field(default=None, repr=False)
    _search_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_data_dir(cls, root: str | os.PathLike[str]) -> Catalog:
        path = Path(root)
        manifest_path = path / MANIFEST_FILE
        if not manifest_path.exists():
            raise DatasetBuildError(_not_prepared(path))
        manifest = read_json_file(manifest_path)
        data = read_archive_bytes(path / PRODUCTS_FILE)
        if sha256_hex(data) != manifest.get("output_data_sha256"):
            raise DatasetBuildError(
                f"{path / PRODUCTS_FILE} does not match its manifest (SHA-256 differs); rebuild with --force"
            )
        products = tuple(validate_records(parse_archive_json(data, source=str(path / PRODUCTS_FILE))))
        goals, _ = build_goals(products)
        task_splits = read_json_file(path / TASK_SPLITS_FILE)
        persona_splits = read_json_file(path / PERSONA_SPLITS_FILE)
        return cls(path, manifest, products, goals, task_splits, persona_splits)

    @cached_property
    def products_by_asin(self) -> dict[str, Product]:
        return {product.asin: product for product in self.products}

    @cached_property
    def product_of_task(self) -> dict[int, Product]:
        by_asin = self.products_by_asin
        return {task_id: by_asin[goal["asin"]] for task_id, goal in self.goals.items()}

    @property
    def search_index(self) -> SearchIndex:
        with self._search_lock:
            if self._search is None:
                self._search = SearchIndex.open(
                    self.root / INDEX_FILE,
                    expected_product_sha256=self.manifest["output_data_sha256"],
                    expected_field_weights=DEFAULT_FIELD_WEIGHTS,
                )
            return self._search

    def goal(self, task_id: object) -> Mapping[str, Any]:
        if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id not in self.goals:
            raise UnknownTaskError(task_id)
        return self.goals[task_id]

    @property
    def split_names(self) -> list[str]:
        return sorted(self.task_splits["splits"])

    def split(self, name: str) -> tuple[int, ...]:
        """Task ids of a split (``train``, ``val``, ``test``, ``standard``, ``all``), sorted."""
        key = SPLIT_ALIASES.get(name, name)
        splits = self.task_splits["splits"]
        if key not in splits:
            raise SplitError(f"unknown task split {name!r}; choose one of: {', '.join(sorted(splits))}")
        return tuple(splits[key]["task_ids"])

    def split_is_persona(self, name: str) -> bool | None:
        return self.task_splits["splits"][SPLIT_ALIASES.get(name, name)].get("persona")

    def close(self) -> None:
        if self._search is not None:
            self._search.close()
            self._search = None
