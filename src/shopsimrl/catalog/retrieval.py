"""Retrieval evaluation over a prepared catalog's split (docs/contract.md#search-evaluation, with explicit id lists)."""

from __future__ import annotations

import os
from typing import Any

from ..search import evaluate_retrieval
from .store import Catalog


def evaluate_split(data_dir: str | os.PathLike[str], split: str = "test", *, top_k: int = 150) -> dict[str, Any]:
    """Recall@1/20/k and MRR@k of the gold ASIN with the simple and the full instruction as query."""
    catalog = Catalog.from_data_dir(data_dir)
    try:
        queries = [
            (task_id, goal["asin"], goal["instruction_simple"] or goal["instruction_text"], goal["instruction_text"])
            for task_id in catalog.split(split)
            if (goal := catalog.goals.get(task_id)) is not None
        ]
        return evaluate_retrieval(catalog.search_index, queries, split=split, top_k=top_k)
    finally:
        catalog.close()
