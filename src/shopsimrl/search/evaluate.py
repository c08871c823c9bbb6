"""Gold-ASIN retrieval proxy (env_spec §3.7) over explicit task lists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import ShopSimError
from .index import SearchIndex

METRIC_SCOPE = "Gold-ASIN retrieval proxy; alternatives may also be valid"


def _metrics(ranks: list[int | None], top_k: int) -> dict[str, Any]:
    n = len(ranks)

    def recall(cut: int) -> float:
        return sum(1 for r in ranks if r is not None and r <= cut) / n if n else 0.0

    return {
        "queries": n,
        "recall_at_1": recall(1),
        "recall_at_20": recall(20),
        f"recall_at_{top_k}": recall(top_k),
        f"mrr_at_{top_k}": (sum(1.0 / r for r in ranks if r is not None) / n) if n else 0.0,
    }


def evaluate_retrieval(
    index: SearchIndex,
    queries: Iterable[tuple[int, str, str, str]],
    *,
    split: str = "custom",
    top_k: int = 150,
) -> dict[str, Any]:
    """``queries`` are (task_id, gold_asin, simple_query, full_query); ranks are of the gold ASIN in the top-k."""
    if top_k < 20:
        raise ShopSimError("top_k must be at least 20")
    ranks: dict[str, list[int | None]] = {"simple": [], "full": []}
    for _task_id, gold, simple, full in queries:
        for mode, text in (("simple", simple or full), ("full", full)):
            hits = index.search(text, k=top_k)
            ranks[mode].append(next((hit.rank for hit in hits if hit.asin == gold), None))
    return {
        "search_version": index.manifest["search_version"],
        "product_data_sha256": index.manifest["product_data_sha256"],
        "split": split,
        "top_k": top_k,
        "metrics": {mode: _metrics(values, top_k) for mode, values in ranks.items()},
        "metric_scope": METRIC_SCOPE,
    }
