"""Shape statistics of a prepared data directory (any archive: generated or real).

Counts, leaf sizes, budget kinds and instruction lengths, read from the prepared files only, so the same
report describes the default catalog and the real ShopSimulator archive.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from ..budget import parse_budget_detail
from ..jsonfile import read_json_file
from .prepare import MANIFEST_FILE
from .store import Catalog


def _length_summary(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {"count": 0, "mean": 0.0, "min": 0, "median": 0.0, "max": 0}
    return {
        "count": len(lengths),
        "mean": round(statistics.fmean(lengths), 2),
        "min": min(lengths),
        "median": float(statistics.median(lengths)),
        "max": max(lengths),
    }


def catalog_shape(root: str | os.PathLike[str], catalog: Catalog | None = None) -> dict[str, Any]:
    """Counts and shape figures of the prepared directory ``root`` (no episodes are played)."""
    root = Path(root)
    manifest = read_json_file(root / MANIFEST_FILE)
    counts = manifest["stats"]
    catalog = catalog or Catalog.from_data_dir(root)
    leaves = Counter(product.category for product in catalog.products_by_asin.values())
    domains = {category.split("›")[0] for category in leaves if category}
    budget_kinds = Counter(
        (detail.kind if (detail := parse_budget_detail(goal["instruction_text"])) else "no_budget")
        for goal in catalog.goals.values()
    )
    persona_ids = set(catalog.split("train")) | set(catalog.split("val")) | set(catalog.split("test"))
    simple_lengths = [len(catalog.goals[t].get("instruction_simple") or "") for t in sorted(persona_ids)]
    full_lengths = [len(goal["instruction_text"]) for goal in catalog.goals.values()]
    sizes = sorted(leaves.values())
    return {
        "raw_products": counts["source_product_count"],
        "products": counts["cleaned_product_count"],
        "excluded_products": counts["excluded_product_count"],
        "persona_tasks": counts["persona_task_count"],
        "standard_tasks": counts["standard_task_count"],
        "active_tasks": counts["active_task_count"],
        "splits": {name: len(catalog.split(name)) for name in ("train", "val", "test")},
        "domains": len(domains),
        "leaf_categories": len(leaves),
        "leaf_size_min": sizes[0] if sizes else 0,
        "leaf_size_median": float(statistics.median(sizes)) if sizes else 0.0,
        "leaf_size_max": sizes[-1] if sizes else 0,
        "budget_kinds": dict(sorted(budget_kinds.items())),
        "instruction_length_full": _length_summary(full_lengths),
        "instruction_length_simple": _length_summary(simple_lengths),
        "data_sha256": manifest["output_data_sha256"],
    }
