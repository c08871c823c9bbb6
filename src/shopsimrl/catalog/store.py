"""A prepared data directory opened for use: products, goals, splits and the search index.

One ``Catalog`` per process is shared read-only by every session. Opening reads, it does not rebuild: the
manifest's format and versions are checked, every file listed in it is checked against its size and SHA-256
(``integrity``), and products, goals and the search postings are memory-mapped in the forms ``prepare`` wrote
(``_lazy``, ``search.stored``), so a record is decoded only when used. ``Catalog.rebuilt`` is the former open path
(parse and validate the cleaned archive, resolve every goal, rebuild the postings from SQLite), kept as the
reference the equivalence test compares against.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import versions
from ..contract import is_task_id
from ..errors import DataError, unknown_task
from ..jsonfile import read_json_file
from ..search import DEFAULT_FIELD_WEIGHTS, SearchIndex
from ..search.stored import ASINS_FILE, POSTINGS_ARRAYS, ROWIDS_FILE, SEARCH_DIR, TERMS_FILE
from ._lazy import RECORD_FILES, RECORDS_DIR, GoalStore, ProductStore
from .archive import parse_archive_json, read_archive_bytes, sha256_hex
from .goals import build_goals
from .integrity import verify_files
from .prepare import (
    BUDGETS_FILE,
    EXCLUSIONS_FILE,
    INDEX_FILE,
    INDEX_MANIFEST_FILE,
    MANIFEST_FILE,
    OPEN_FORMAT_VERSION,
    PERSONA_SPLITS_FILE,
    PREPARE_VERSION,
    PRODUCTS_FILE,
    TASK_SPLITS_FILE,
)
from .record_checks import validate_records
from .records import Product

#: Result lists the catalog's search index caches (LRU, keyed by query tokens): the bound the environment's
#: search had when it kept a second cache of its own, keyed by the raw query text.
SEARCH_CACHE_SIZE = 65536
SPLIT_ALIASES = {"validation": "val", "persona_test": "test", "persona_val": "val", "persona_train": "train"}
#: Manifest entries that must equal this package's versions: a change in any of them changes prepared data.
_VERSION_KEYS = {
    "prepare_version": PREPARE_VERSION,
    "schema_version": versions.DATASET_SCHEMA_VERSION,
    "search_version": versions.SEARCH_VERSION,
    "budget_parser_version": versions.BUDGET_PARSER_VERSION,
}


def _rerun(path: Path) -> str:
    return f"re-run `shopsimrl data prepare --archive ARCHIVE --out {path} --force` (or `data build-default --force`)"


def _not_prepared(path: Path) -> str:
    return (
        f"{path} is not a prepared data directory (no {MANIFEST_FILE}); build the default catalog with "
        f"`shopsimrl data build-default --out {path}` (or `make run`, which builds data/default), or prepare "
        "a real archive with `shopsimrl data prepare --archive FILE --out DIR`"
    )


def check_data_dir(root: str | os.PathLike[str], split: str | None = None) -> bool | None:
    """The cheap checks of a data directory and a split name, from two small JSON files; returns the
    split's declared persona mode (None: mixed or no split given).

    A typo in a path or a split name must be reported before a catalog is opened, not after.
    """
    path = Path(root)
    if not (path / MANIFEST_FILE).exists():
        raise DataError(_not_prepared(path), code="data_directory")
    if split is None:
        return None
    splits = read_json_file(path / TASK_SPLITS_FILE).get("splits")
    if not isinstance(splits, Mapping):
        raise DataError(f"{path}: cannot read {TASK_SPLITS_FILE}: it has no 'splits' object", code="data_directory")
    if SPLIT_ALIASES.get(split, split) not in splits:
        raise DataError(f"unknown task split {split!r}; choose one of: {', '.join(sorted(splits))}", code="invalid_split")
    declared = splits[SPLIT_ALIASES.get(split, split)]
    return declared.get("persona") if isinstance(declared, Mapping) else None


def read_manifest(path: Path) -> dict[str, Any]:
    """The parsed ``manifest.json`` of a prepared directory, or a one-line typed error naming it."""
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.exists():
        raise DataError(_not_prepared(path), code="data_directory")
    manifest: dict[str, Any] = read_json_file(manifest_path)
    return manifest


def check_versions(path: Path, manifest: Mapping[str, Any]) -> None:
    """Refuse a directory written by another prepare version, or without the files opening reads."""
    fmt = manifest.get("open_format")
    if not isinstance(fmt, Mapping) or fmt.get("version") != OPEN_FORMAT_VERSION:
        found = fmt.get("version") if isinstance(fmt, Mapping) else None
        raise DataError(
            f"{path} was prepared by an older version ({manifest.get('prepare_version')!r}, open format {found!r}; "
            f"this version reads {OPEN_FORMAT_VERSION!r}); {_rerun(path)}", code="data_directory"
        )
    for key, expected in _VERSION_KEYS.items():
        if manifest.get(key) != expected:
            raise DataError(
                f"{path} was prepared with {key} {manifest.get(key)!r}, this version uses {expected!r}; {_rerun(path)}", code="data_directory"
            )
    files, sizes = manifest.get("files"), manifest.get("file_sizes")
    if not isinstance(files, Mapping) or not isinstance(sizes, Mapping) or set(files) != set(sizes):
        raise DataError(f"{path / MANIFEST_FILE} lacks its file list (files, file_sizes); {_rerun(path)}", code="data_integrity")
    unlisted = [name for name in opened_files(manifest) if name not in files]
    if unlisted:  # a file that is not listed would be opened unchecked
        raise DataError(f"{path / MANIFEST_FILE} does not list {', '.join(unlisted[:3])}"
                                 f"{' …' if len(unlisted) > 3 else ''}: every file the catalog opens must be listed "
                                 f"with its SHA-256; {_rerun(path)}", code="data_integrity")


def opened_files(manifest: Mapping[str, Any]) -> list[str]:
    """Every file opening and serving the catalog may read, as the manifest names them."""
    names = [PRODUCTS_FILE, EXCLUSIONS_FILE, BUDGETS_FILE, PERSONA_SPLITS_FILE, TASK_SPLITS_FILE, INDEX_FILE,
             INDEX_MANIFEST_FILE]
    names += [f"{RECORDS_DIR}/{name}" for name in RECORD_FILES]
    names += [f"{SEARCH_DIR}/{name}" for name in (ROWIDS_FILE, ASINS_FILE)]
    fmt = manifest.get("open_format")
    search = fmt.get("search") if isinstance(fmt, Mapping) else None
    if isinstance(search, Mapping) and search.get("postings"):
        names.append(f"{SEARCH_DIR}/{TERMS_FILE}")
        names += [f"{SEARCH_DIR}/postings_{name}.npy" for name in POSTINGS_ARRAYS]
    return names


@dataclass
class Catalog:
    """Everything an episode needs from the data, shared by all sessions of a process."""

    root: Path
    manifest: Mapping[str, Any]
    products_by_asin: Mapping[str, Product]
    goals: Mapping[int, Mapping[str, Any]]
    #: True when the search index holds exactly the catalog's ASINs (checked by ``prepare``): no hit filter needed.
    index_covers_products: bool = False
    stored_search: bool = True
    _search: SearchIndex | None = field(default=None, repr=False)
    _search_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_data_dir(cls, root: str | os.PathLike[str]) -> Catalog:
        """Open a prepared directory by reading its stored forms, after the version and file checks."""
        path = Path(root)
        manifest = read_manifest(path)
        check_versions(path, manifest)
        verify_files(path, manifest["files"], manifest["file_sizes"])
        try:
            products = ProductStore(path / RECORDS_DIR)
            goals = GoalStore(path / RECORDS_DIR)
        except (OSError, ValueError) as exc:
            raise DataError(f"{path / RECORDS_DIR} cannot be read ({exc}); {_rerun(path)}", code="data_integrity") from None
        covers = bool(manifest["open_format"].get("index_covers_products"))
        return cls(path, manifest, products, goals, index_covers_products=covers)

    @classmethod
    def rebuilt(cls, root: str | os.PathLike[str]) -> Catalog:
        """The former open path: everything rebuilt in memory from the cleaned archive and SQLite (slow; reference)."""
        path = Path(root)
        manifest = read_manifest(path)
        data = read_archive_bytes(path / PRODUCTS_FILE)
        if sha256_hex(data) != manifest.get("output_data_sha256"):
            raise DataError(f"{path / PRODUCTS_FILE} does not match its manifest (SHA-256 differs)", code="data_integrity")
        products = tuple(validate_records(parse_archive_json(data, source=str(path / PRODUCTS_FILE))))
        goals, _ = build_goals(products)
        by_asin = {product.asin: product for product in products}
        return cls(path, manifest, by_asin, goals, index_covers_products=False, stored_search=False)

    @cached_property
    def task_splits(self) -> Mapping[str, Any]:
        return self._read_json(TASK_SPLITS_FILE)

    @cached_property
    def persona_splits(self) -> Mapping[str, Any]:
        return self._read_json(PERSONA_SPLITS_FILE)

    def _read_json(self, name: str) -> Mapping[str, Any]:
        content: Mapping[str, Any] = read_json_file(self.root / name)
        return content

    @property
    def products(self) -> tuple[Product, ...]:
        """Every product in archive order (decodes them all: for offline tools, not for serving)."""
        return tuple(self.products_by_asin.values())

    @property
    def search_index(self) -> SearchIndex:
        with self._search_lock:
            if self._search is None:
                self._search = self._open_search()
            return self._search

    def _open_search(self) -> SearchIndex:
        expected = {"expected_product_sha256": self.manifest["output_data_sha256"],
                    "expected_field_weights": DEFAULT_FIELD_WEIGHTS}
        if not self.stored_search:
            return SearchIndex.open(self.root / INDEX_FILE, cache_size=SEARCH_CACHE_SIZE, **expected)
        stored = self.manifest["open_format"]["search"]
        if stored.get("index_sha256") != self.manifest["files"].get(INDEX_FILE):
            raise DataError(
                f"{self.root / SEARCH_DIR} was stored for another {INDEX_FILE}; {_rerun(self.root)}", code="data_integrity"
            )
        return SearchIndex.open_stored(
            self.root / INDEX_FILE, self.root / SEARCH_DIR, stored, cache_size=SEARCH_CACHE_SIZE, **expected
        )

    def product_record(self, asin: str) -> Mapping[str, Any]:
        """The archive record of one product (``KeyError`` when unknown); read-only by convention.

        Why: a stored catalog makes a ``Product`` on first use by decoding and re-validating its record; a result
        page lists ten products that are mostly never opened and needs only their records, which is several
        times cheaper at a million products, where almost every listed product is new to the process.
        """
        products = self.products_by_asin
        if isinstance(products, ProductStore):
            return products.record(asin)
        return products[asin].raw

    def goal(self, task_id: object) -> Mapping[str, Any]:
        if not is_task_id(task_id) or task_id not in self.goals:
            raise unknown_task(task_id)
        return self.goals[task_id]

    @property
    def split_names(self) -> list[str]:
        return sorted(self.task_splits["splits"])

    def split(self, name: str) -> tuple[int, ...]:
        """Task ids of a split (``train``, ``val``, ``test``, ``standard``, ``all``), sorted."""
        key = SPLIT_ALIASES.get(name, name)
        splits = self.task_splits["splits"]
        if key not in splits:
            raise DataError(f"unknown task split {name!r}; choose one of: {', '.join(sorted(splits))}", code="invalid_split")
        return tuple(splits[key]["task_ids"])

    def split_is_persona(self, name: str) -> bool | None:
        persona: bool | None = self.task_splits["splits"][SPLIT_ALIASES.get(name, name)].get("persona")
        return persona

    def close(self) -> None:
        if self._search is not None:
            self._search.close()
            self._search = None
