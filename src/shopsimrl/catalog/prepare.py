"""``shopsimrl data prepare``: validate → clean → budgets → splits → index, into one data directory.

Every output is deterministic and written atomically; the source archive is never touched; a directory
prepared from the same inputs with the same parameters is left as it is (idempotent), and anything else
is refused unless ``force`` is given.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import versions
from ..budget import load_budget_annotations
from ..budget.annotations import check_annotation_identities
from ..errors import DataError, ShopSimError
from ..search import SearchIndex, build_search_index
from ..search.stored import SEARCH_DIR, STORED_SEARCH_VERSION, save_search_arrays
from ._lazy import RECORDS_DIR, iter_product_records
from .archive import atomic_write_bytes, dump_json_file_bytes, file_sha256, sha256_hex
from .cleaning import Cleaner, CleaningResult
from .integrity import write_stamp
from .prepare_pass import Totals, stream_archive
from .splits import DEFAULT_SEED, build_persona_splits

PRODUCTS_FILE = "products.json.gz"
EXCLUSIONS_FILE = "exclusions.json"
BUDGETS_FILE = "budgets.json"
PERSONA_SPLITS_FILE = "persona_splits.json"
TASK_SPLITS_FILE = "task_splits.json"
INDEX_FILE = "products.sqlite3"
INDEX_MANIFEST_FILE = "index_manifest.json"
MANIFEST_FILE = "manifest.json"
PREPARE_VERSION = "shopsimrl-prepare-v2"
#: Layout of the files opening reads instead of rebuilding (records/, search/); see ``store.Catalog``.
OPEN_FORMAT_VERSION = "shopsimrl-open-v1"
#: Outputs are written here first and moved into place at the end: a failed prepare leaves nothing half-written.
BUILD_DIR = ".prepare-building"
#: Source records validated and cleaned at a time (memory holds one chunk of records, never the archive).
PREPARE_CHUNK = 2000

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PrepareOptions:
    test_size: int | None = None  # None: splits.default_split_size (400 at the real scale, fewer below)
    val_size: int | None = None
    seed: int = DEFAULT_SEED
    annotations: Path | None = None


def _plan(source_sha: str, annotations_sha: str | None, options: PrepareOptions) -> dict[str, Any]:
    return {
        "prepare_version": PREPARE_VERSION,
        "source_archive_sha256": source_sha,
        "annotations_sha256": annotations_sha,
        "test_size": options.test_size,
        "val_size": options.val_size,
        "seed": options.seed,
        "schema_version": versions.DATASET_SCHEMA_VERSION,
        "search_version": versions.SEARCH_VERSION,
        "budget_parser_version": versions.BUDGET_PARSER_VERSION,
        "open_format_version": OPEN_FORMAT_VERSION,
    }


def _plan_fingerprint(plan: Mapping[str, Any]) -> str:
    return sha256_hex(json.dumps(plan, sort_keys=True, separators=(",", ":")).encode())


def _is_up_to_date(out: Path, fingerprint: str) -> bool:
    manifest_path = out / MANIFEST_FILE
    if not manifest_path.is_file():
        return False
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8, bad JSON: not up to date
        return False
    if manifest.get("plan_fingerprint") != fingerprint:
        return False
    files = manifest.get("files", {})
    return all((out / name).is_file() and file_sha256(out / name) == sha for name, sha in files.items())


def _task_splits(result: CleaningResult, persona: Mapping[str, Any]) -> dict[str, Any]:
    splits = {name: {"task_ids": entry["task_ids"], "persona": True} for name, entry in persona["splits"].items()}
    splits["standard"] = {"task_ids": result.standard_task_ids, "persona": False}
    splits["all"] = {"task_ids": sorted(result.persona_task_ids + result.standard_task_ids), "persona": None}
    return {
        "version": versions.SOURCE_SPLITS_VERSION,
        "id_semantics": "IDs assigned before filtering; gaps are intentional",
        "source_task_count": result.source_task_count,
        "active_task_count": result.active_task_count,
        "splits": splits,
    }


def _store_search(out_dir: Path, index_sha256: str, product_count: int) -> tuple[dict[str, Any], list[str]]:
    """Rebuild the postings from the new index once (checked on the full query sample) and store them for opening.

    The index holds each cleaned product once (validation refuses empty and repeated ASINs), so when its row
    count equals the product count it covers exactly the catalog and searches need no membership filter."""
    with SearchIndex.open(out_dir / INDEX_FILE, accelerate=False, cache_size=1) as index:
        asins = index.asin_of_rowid
        covers = len(asins) == product_count
        try:  # the postings are built a chunk of rows at a time straight into their files, then verified
            meta, names = save_search_arrays(out_dir / SEARCH_DIR, asins, index.store_postings)
        except ValueError as exc:
            raise DataError(f"cannot store the search index for opening: {exc}", code="dataset_build") from exc
    meta |= {"layout": STORED_SEARCH_VERSION, "index_sha256": index_sha256, "covers": covers}
    return meta, names


def prepare_dataset(
    archive: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    options: PrepareOptions | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the whole pipeline; returns the dataset manifest (with ``"up_to_date": True`` when nothing ran)."""
    options = options or PrepareOptions()
    say = progress or (lambda message: None)
    archive_path = Path(archive).resolve()
    out_dir = Path(out).resolve()
    if archive_path.parent == out_dir and archive_path.name in {
        PRODUCTS_FILE, EXCLUSIONS_FILE, BUDGETS_FILE, PERSONA_SPLITS_FILE, TASK_SPLITS_FILE, INDEX_FILE, MANIFEST_FILE,
    }:
        raise DataError(f"refusing to write outputs over the source archive {archive_path}", code="dataset_build")
    if not archive_path.is_file():
        raise DataError(f"archive not found: {archive_path}", code="dataset_build")
    source_sha = file_sha256(archive_path)
    annotations_sha = file_sha256(options.annotations) if options.annotations else None
    plan = _plan(source_sha, annotations_sha, options)
    fingerprint = _plan_fingerprint(plan)
    if _is_up_to_date(out_dir, fingerprint):
        manifest: dict[str, Any] = json.loads((out_dir / MANIFEST_FILE).read_text("utf-8"))
        manifest["up_to_date"] = True
        return manifest
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise DataError(
            f"{out_dir} already holds other data; pass --force to rebuild it from {archive_path.name}", code="dataset_build"
        )
    out_dir.mkdir(parents=True, exist_ok=True)

    work = out_dir / BUILD_DIR
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    try:
        try:
            manifest, names = _build(archive_path, work, options, plan, fingerprint, source_sha, say)
        except (ShopSimError, OSError) as exc:  # name the user's directory, never the temporary build folder
            if str(work) not in str(exc):
                raise
            raise DataError(str(exc).replace(str(work), str(out_dir)), code="dataset_build") from exc
        for name in names:  # everything was written under BUILD_DIR; move it into place, the manifest last
            (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(work / name, out_dir / name)
        os.replace(work / MANIFEST_FILE, out_dir / MANIFEST_FILE)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_stamp(out_dir, manifest["files"])
    say("done")
    return manifest


def _split_sources(
    archive_path: Path, source_sha: str, archive_sha: str, data_sha: str, options: PrepareOptions
) -> dict[str, Any]:
    """The names and SHA-256 of the inputs the persona splits are built from (the reference builder's
    ``source`` block: its eight keys name its own input files; these name ours)."""
    annotations = Path(options.annotations) if options.annotations else None
    return {
        "source_archive": archive_path.name,
        "source_archive_sha256": source_sha,
        "cleaned_archive": PRODUCTS_FILE,
        "cleaned_archive_sha256": archive_sha,
        "cleaned_archive_data_sha256": data_sha,
        "budget_annotations": annotations.name if annotations else None,
        "budget_annotations_sha256": file_sha256(annotations) if annotations else None,
        "source_splits_version": versions.SOURCE_SPLITS_VERSION,
    }


def _build(
    archive_path: Path,
    work: Path,
    options: PrepareOptions,
    plan: Mapping[str, Any],
    fingerprint: str,
    source_sha: str,
    say: Progress,
) -> tuple[dict[str, Any], list[str]]:
    """Every output under ``work``; returns the manifest (written there too) and the other files' names."""
    annotations = load_budget_annotations(options.annotations) if options.annotations else None
    cleaner = Cleaner(annotations)
    say("validating, cleaning and writing the archive, records and goals (streamed)")
    identities: dict[int, tuple[str, str]] | None = {} if options.annotations else None
    totals, (data_sha, archive_sha), stored_files = stream_archive(
        archive_path, work / PRODUCTS_FILE, work / RECORDS_DIR, cleaner, say, identities, chunk_size=PREPARE_CHUNK)
    if not totals.cleaned_products:  # an empty catalog serves nothing: never let it replace a catalog
        held = cleaner.result([]).source_product_count
        raise DataError(
            f"{archive_path} yields no products ({held} record(s) read, none kept after validation and cleaning): "
            "nothing was written; check the archive (a JSON array of product records)", code="dataset_build")
    if options.annotations and identities is not None:  # ids number from 0 in every archive: refuse another's
        check_annotation_identities(options.annotations, identities)
    result = cleaner.result([])
    say("building persona splits")
    persona_splits = build_persona_splits(
        sorted(totals.persona_tasks, key=lambda task: task.task_id),
        seed=options.seed,
        test_size=options.test_size,
        val_size=options.val_size,
        source=_split_sources(archive_path, source_sha, archive_sha, data_sha, options),
    )
    totals.persona_tasks = []
    hashes = _write_tables(work, result, totals, persona_splits) | {PRODUCTS_FILE: archive_sha}
    say(f"building search index over {totals.cleaned_products} products")
    index_manifest = build_search_index(
        iter_product_records(work / RECORDS_DIR), work / INDEX_FILE, product_data_sha256=data_sha
    )
    atomic_write_bytes(work / INDEX_MANIFEST_FILE, dump_json_file_bytes(index_manifest))
    say("storing the search postings for opening")
    search_meta, search_files = _store_search(work, index_manifest["index_sha256"], totals.cleaned_products)
    stored_files += search_files
    index_covers_products = search_meta.pop("covers")
    hashes |= {name: file_sha256(work / name) for name in (INDEX_FILE, INDEX_MANIFEST_FILE, *stored_files)}
    stats = _stats(result, totals, persona_splits)
    manifest = {
        "schema_version": versions.DATASET_SCHEMA_VERSION,
        "prepare_version": PREPARE_VERSION,
        "environment_version": versions.ENVIRONMENT_VERSION,
        "catalog_filter": {
            "version": versions.CATALOG_FILTER_VERSION,
            "max_price_affecting_axes": versions.MAX_PRICE_AFFECTING_AXES,
        },
        "budget_parser_version": versions.BUDGET_PARSER_VERSION,
        "search_version": versions.SEARCH_VERSION,
        "plan": dict(plan),
        "plan_fingerprint": fingerprint,
        "source_archive": archive_path.name,
        "source_archive_sha256": source_sha,
        "output_archive": PRODUCTS_FILE,
        "output_archive_sha256": archive_sha,
        "output_data_sha256": data_sha,
        "exclusions_sha256": hashes[EXCLUSIONS_FILE],
        "persona_splits_sha256": hashes[PERSONA_SPLITS_FILE],
        "task_splits_sha256": hashes[TASK_SPLITS_FILE],
        "index_sha256": index_manifest.get("index_sha256"),
        "open_format": {
            "version": OPEN_FORMAT_VERSION,
            "index_covers_products": index_covers_products,
            "search": search_meta,
        },
        "stats": stats,
        "files": hashes,
        "file_sizes": {name: (work / name).stat().st_size for name in hashes},
    }
    atomic_write_bytes(work / MANIFEST_FILE, dump_json_file_bytes(manifest))
    return manifest, sorted(hashes)


def _write_tables(work: Path, result: CleaningResult, totals: Totals, persona_splits: Mapping[str, Any]) -> dict[str, str]:
    """Write the exclusions, budgets and split tables; return their SHA-256 by name. The budget audit rows are
    dropped from ``totals`` once written, leaving their count and sources."""
    totals.budget_rows.sort()
    budgets = [
        {"task_id": task_id, "asin": asin, "price_upper": price, "source": source}
        for task_id, asin, price, source in totals.budget_rows
    ]
    totals.budget_sources = dict(sorted(Counter(row[3] for row in totals.budget_rows).items()))
    totals.active_tasks = len(totals.budget_rows)
    totals.budget_rows = []
    files: dict[str, bytes] = {
        EXCLUSIONS_FILE: dump_json_file_bytes([item.to_json() for item in result.exclusions]),
        BUDGETS_FILE: dump_json_file_bytes(budgets),
        PERSONA_SPLITS_FILE: dump_json_file_bytes(persona_splits),
        TASK_SPLITS_FILE: dump_json_file_bytes(_task_splits(result, persona_splits)),
    }
    del budgets
    for name, payload in files.items():
        atomic_write_bytes(work / name, payload)
    return {name: sha256_hex(payload) for name, payload in files.items()}


def _stats(result: CleaningResult, totals: Totals, persona_splits: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's ``stats``: counts of the source, the cleaned catalog, its tasks and splits."""
    return {
        "source_product_count": result.source_product_count,
        "source_task_count": result.source_task_count,
        "cleaned_product_count": totals.cleaned_products,
        "active_task_count": totals.active_tasks,
        "excluded_product_count": len(result.exclusions),
        "excluded_task_count": sum(len(item.task_ids) for item in result.exclusions),
        "persona_task_count": len(result.persona_task_ids),
        "standard_task_count": len(result.standard_task_ids),
        "annotated_task_count": len(result.annotated_task_ids),
        "inactive_instruction_count": totals.inactive_instructions,
        "budget_sources": totals.budget_sources,
        "split_sizes": {name: entry["task_count"] for name, entry in persona_splits["splits"].items()},
    }
