"""Gold-ASIN retrieval proxy (docs/contract.md#search-evaluation) over an explicit list of tasks.

The reference script enumerated tasks by position from range-form splits, which selects the wrong tasks
with explicit-id split manifests; here the caller passes the tasks themselves, so any split (or any list)
is evaluated exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from .. import versions
from ._index import SearchIndex

METRIC_SCOPE = "Gold-ASIN retrieval proxy; alternatives may also be valid"
MIN_TOP_K = 20


class RetrievalQuery(NamedTuple):
    """One task: its gold ASIN, the simple query (``instruction_simple``) and the full instruction."""

    task_id: int
    gold_asin: str
    simple_query: str
    full_query: str


def _metrics(ranks: list[int | None], top_k: int) -> dict[str, Any]:
    n = len(ranks)

    def recall(cut: int) -> float:
        return sum(1 for r in ranks if r is not None and r <= cut) / n if n else 0.0

    return {
        "queries": n,
        "recall_at_1": recall(1),
        "recall_at_20": recall(20),
        f"recall_at_{top_k}": recall(top_k),
        f"mrr_at_{top_k}": sum(1.0 / r for r in ranks if r is not None) / n if n else 0.0,
    }


def gold_rank(index: SearchIndex, query: str, gold_asin: str, top_k: int) -> int | None:
    """1-based rank of ``gold_asin`` in the top-``top_k`` hits of ``query``, or None.

    Uncached: an evaluation asks each query once, so caching it would only fill the index's result cache."""
    return next((hit.rank for hit in index.search_uncached(query, k=top_k) if hit.asin == gold_asin), None)


def evaluate_retrieval(
    index: SearchIndex,
    queries: Iterable[tuple[int, str, str, str] | RetrievalQuery],
    *,
    split: str = "custom",
    top_k: int = versions.SEARCH_TOP_K,
) -> dict[str, Any]:
    """Recall@1/20/k and MRR@k of the gold ASIN, once with the simple and once with the full query.

    ``queries`` are (task_id, gold_asin, simple_query, full_query); an empty simple query falls back to the
    full one, as in the reference. A task id given twice is an error (it would weight that task double).
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < MIN_TOP_K:
        raise ValueError(f"top_k must be an integer >= {MIN_TOP_K}, got {top_k!r}")
    ranks: dict[str, list[int | None]] = {"simple": [], "full": []}
    seen: set[int] = set()
    for task_id, gold, simple, full in queries:
        if task_id in seen:
            raise ValueError(f"task_id {task_id} is listed twice")
        seen.add(task_id)
        full_rank = gold_rank(index, full, gold, top_k)
        ranks["simple"].append(gold_rank(index, simple, gold, top_k) if simple and simple != full else full_rank)
        ranks["full"].append(full_rank)
    return {
        "search_version": index.manifest["search_version"],
        "product_data_sha256": index.manifest["product_data_sha256"],
        "split": split,
        "top_k": top_k,
        "metrics": {mode: _metrics(values, top_k) for mode, values in ranks.items()},
        "metric_scope": METRIC_SCOPE,
    }
