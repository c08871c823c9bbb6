"""Difficulty tiers of a data directory's tasks (``difficulty_tiers.json``), read by eval and every trainer.

A task's tier is the first public-information built-in policy, in the order ``first`` (the trivial
first-result policy), ``heuristic``, ``strong``, that solves it (r_success = 1, in the task's own mode), or
``none`` when none does. The labels are computed once per catalog (``shopsimrl data tiers``,
``shopsimrl.agent.tier_cascade``), deterministic (the built-in policies ignore seeds), and keyed by the catalog's data
hash and :data:`TIERS_VERSION`, so a rebuilt catalog or changed policies never reuse stale labels. This module
only reads them: a filter for a split's task ids, so a trainer can run a curriculum.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import DataError, ShopSimError
from ..jsonfile import read_json_file
from .prepare import MANIFEST_FILE

TIERS_FILE = "difficulty_tiers.json"
TIERS_VERSION = "shopsimrl-difficulty-tiers-v1"
TIER_POLICIES = ("first", "heuristic", "strong")
TIERS = (*TIER_POLICIES, "none")


def parse_difficulty(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``"first,heuristic"`` (or a list of names) → the tiers in canonical order; None → no filter."""
    if text is None:
        return None
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in TIERS]
    if unknown or not names:
        raise DataError(f"unknown difficulty tier {', '.join(unknown) or repr(text)}; choose from "
                              + ", ".join(TIERS), code="difficulty")
    return tuple(t for t in TIERS if t in names)


def tiers_key(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What the stored labels must match: the tiers version and the catalog's data hash."""
    manifest = read_json_file(Path(data_dir) / MANIFEST_FILE)
    return {"tiers_version": TIERS_VERSION, "data_sha256": manifest.get("output_data_sha256"),
            "policies": list(TIER_POLICIES)}


def stored_tiers(data_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stored tiers document when it matches this catalog, else None."""
    path = Path(data_dir) / TIERS_FILE
    if not path.is_file():
        return None
    try:
        document: dict[str, Any] = read_json_file(path)
    except (ShopSimError, ValueError, OSError):
        return None
    return document if document.get("key") == tiers_key(data_dir) else None


def read_tiers(data_dir: str | os.PathLike[str]) -> dict[int, str]:
    """task id → tier; a clear error naming the command that computes them when missing or stale."""
    document = stored_tiers(data_dir)
    if document is None:
        raise DataError(f"{data_dir} has no current difficulty tiers ({TIERS_FILE}); compute them once with "
                              f"`shopsimrl data tiers {data_dir}`", code="difficulty")
    return {int(task): tier for tier, ids in document["tiers"].items() for task in ids}


def filter_by_difficulty(task_ids: Iterable[int], tiers: Mapping[int, str],
                         wanted: Sequence[str] | None) -> list[int]:
    """``task_ids`` in order, those whose tier is in ``wanted`` (all of them when ``wanted`` is None)."""
    ids = list(task_ids)
    if wanted is None:
        return ids
    missing = [t for t in ids if t not in tiers]
    if missing:
        raise DataError(f"{len(missing)} tasks have no difficulty tier (first: {missing[0]}); "
                                 "recompute the tiers", code="data_directory")
    return [t for t in ids if tiers[t] in wanted]


def split_task_ids(data_dir: str | os.PathLike[str], split: str, *, difficulty: str | Sequence[str] | None = None,
                   limit: int | None = None) -> list[int]:
    """The task source of every adapter: a split's ids, filtered by tier, then the first ``limit``."""
    from .store import Catalog

    wanted = parse_difficulty(difficulty)
    catalog = Catalog.from_data_dir(data_dir)
    try:
        ids = list(catalog.split(split))
    finally:
        catalog.close()
    if wanted is not None:
        ids = filter_by_difficulty(ids, read_tiers(data_dir), wanted)
    return ids[:limit] if limit is not None else ids
