"""``shopsimrl data prepare``: validate → clean → budgets → splits → index, into one data directory.

Every output is deterministic and written atomically; the source archive is never touched; a directory
prepared from the same inputs with the same parameters is left as it is (idempotent), and anything else
is refused unless ``force`` is given.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import versions
from ..budget import load_budget_annotations
from ..budget.annotations import check_annotation_identities, task_identities
from ..errors import DatasetBuildError
from ..search import build_search_index
from .archive import (
    atomic_write_bytes,
    dump_archive_json,
    dump_json_file_bytes,
    file_sha256,
    gzip_deterministic,
    load_archive,
    sha256_hex,
    validate_records,
)
from .cleaning import CleaningResult, clean_products
from .goals import build_goals
from .splits import DEFAULT_SEED, PersonaTask, build_persona_splits

PRODUCTS_FILE = "products.json.gz"
EXCLUSIONS_FILE = "exclusions.json"
BUDGETS_FILE = "budgets.json"
PERSONA_SPLITS_FILE = "persona_splits.json"
TASK_SPLITS_FILE = "task_splits.json"
INDEX_FILE = "products.sqlite3"
INDEX_MANIFEST_FILE = "index_manifest.json"
MANIFEST_FILE = "manifest.json"
PREPARE_VERSION = "shopsimrl-prepare-v1"

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


def _budget_audit(result: CleaningResult, goals: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    audit = []
    precomputed = {
        instruction["task_id"]: instruction.get("price_upper")
        for record in result.records
        for instruction in record["instructions"]
    }
    for task_id in sorted(goals):
        goal = goals[task_id]
        source = "precomputed" if precomputed.get(task_id) is not None else "instruction_parser"
        if goal["price_upper"] is None:
            source = "none"
        audit.append({"task_id": task_id, "asin": goal["asin"], "price_upper": goal["price_upper"], "source": source})
    return audit


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
        raise DatasetBuildError(f"refusing to write outputs over the source archive {archive_path}")
    if not archive_path.is_file():
        raise DatasetBuildError(f"archive not found: {archive_path}")
    source_sha = file_sha256(archive_path)
    annotations_sha = file_sha256(options.annotations) if options.annotations else None
    plan = _plan(source_sha, annotations_sha, options)
    fingerprint = _plan_fingerprint(plan)
    if _is_up_to_date(out_dir, fingerprint):
        manifest = json.loads((out_dir / MANIFEST_FILE).read_text("utf-8"))
        manifest["up_to_date"] = True
        return manifest
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise DatasetBuildError(
            f"{out_dir} already holds other data; pass --force to rebuild it from {archive_path.name}"
        )
    out_dir.mkdir(parents=True, exist_ok=True)

    say("validating archive")
    products, _ = load_archive(archive_path)
    annotations = load_budget_annotations(options.annotations) if options.annotations else None
    say(f"cleaning {len(products)} products")
    result = clean_products(products, annotations=annotations)
    if options.annotations:  # ids number from 0 in every archive: refuse another archive's annotations
        check_annotation_identities(options.annotations, task_identities(result.records))
    data = dump_archive_json(result.records)
    archive_bytes = gzip_deterministic(data)
    cleaned = validate_records(json.loads(data), source="cleaned archive")
    say("resolving budgets")
    goals, skips = build_goals(cleaned)
    say("building persona splits")
    persona_tasks = [
        PersonaTask(goal["task_id"], goal["asin"], goal["instruction_simple"], goal["instruction_text"], goal["user_persona"])
        for goal in (goals[t] for t in result.persona_task_ids)
    ]
    persona_splits = build_persona_splits(
        persona_tasks,
        seed=options.seed,
        test_size=options.test_size,
        val_size=options.val_size,
        source={"cleaned_archive": PRODUCTS_FILE, "cleaned_archive_data_sha256": sha256_hex(data)},
    )
    data_sha = sha256_hex(data)
    files: dict[str, bytes] = {
        PRODUCTS_FILE: archive_bytes,
        EXCLUSIONS_FILE: dump_json_file_bytes([item.to_json() for item in result.exclusions]),
        BUDGETS_FILE: dump_json_file_bytes(_budget_audit(result, goals)),
        PERSONA_SPLITS_FILE: dump_json_file_bytes(persona_splits),
        TASK_SPLITS_FILE: dump_json_file_bytes(_task_splits(result, persona_splits)),
    }
    for name, payload in files.items():
        atomic_write_bytes(out_dir / name, payload)
    say(f"building search index over {len(cleaned)} products")
    index_manifest = build_search_index(
        (product.raw for product in cleaned), out_dir / INDEX_FILE, product_data_sha256=data_sha
    )
    atomic_write_bytes(out_dir / INDEX_MANIFEST_FILE, dump_json_file_bytes(index_manifest))

    budget_sources: dict[str, int] = {}
    for row in json.loads(files[BUDGETS_FILE]):
        budget_sources[row["source"]] = budget_sources.get(row["source"], 0) + 1
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
        "plan": plan,
        "plan_fingerprint": fingerprint,
        "source_archive": archive_path.name,
        "source_archive_sha256": source_sha,
        "output_archive": PRODUCTS_FILE,
        "output_archive_sha256": sha256_hex(archive_bytes),
        "output_data_sha256": data_sha,
        "exclusions_sha256": sha256_hex(files[EXCLUSIONS_FILE]),
        "persona_splits_sha256": sha256_hex(files[PERSONA_SPLITS_FILE]),
        "task_splits_sha256": sha256_hex(files[TASK_SPLITS_FILE]),
        "index_sha256": index_manifest.get("index_sha256"),
        "stats": {
            "source_product_count": result.source_product_count,
            "source_task_count": result.source_task_count,
            "cleaned_product_count": len(result.records),
            "active_task_count": len(goals),
            "excluded_product_count": len(result.exclusions),
            "excluded_task_count": sum(len(item.task_ids) for item in result.exclusions),
            "persona_task_count": len(result.persona_task_ids),
            "standard_task_count": len(result.standard_task_ids),
            "annotated_task_count": len(result.annotated_task_ids),
            "inactive_instruction_count": skips.instructions_without_attributes,
            "budget_sources": dict(sorted(budget_sources.items())),
            "split_sizes": {name: entry["task_count"] for name, entry in persona_splits["splits"].items()},
        },
        "files": {
            name: sha256_hex(payload) for name, payload in files.items()
        } | {INDEX_FILE: file_sha256(out_dir / INDEX_FILE), INDEX_MANIFEST_FILE: file_sha256(out_dir / INDEX_MANIFEST_FILE)},
    }
    atomic_write_bytes(out_dir / MANIFEST_FILE, dump_json_file_bytes(manifest))
    say("done")
    return manifest


def dataset_fingerprint(manifest: Mapping[str, Any]) -> str:
    """A short id of a prepared catalog, for run manifests and alignment checks."""
    return hashlib.sha256(str(manifest.get("output_data_sha256")).encode()).hexdigest()[:16]
