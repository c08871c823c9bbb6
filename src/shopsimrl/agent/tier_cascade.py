"""Compute a catalog's difficulty tiers (``shopsimrl data tiers``; read by ``shopsimrl.catalog.tiers``).

The cascade plays ``first`` on every active task, ``heuristic`` on the tasks ``first`` failed, ``strong`` on
those both failed; each task's tier is the first policy that solved it, else ``none``. Episodes run in the
task's own mode (persona tasks in persona mode) through :func:`measure_policy`, whose results do not depend
on the worker count; the document is written atomically, so two processes computing at once write the same
bytes and a reader never sees half a file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..catalog.archive import atomic_write_bytes, dump_json_file_bytes
from ..catalog.store import Catalog
from ..catalog.tiers import TIER_POLICIES, TIERS, TIERS_FILE, stored_tiers, tiers_key
from .difficulty import measure_policy


def compute_tiers(
    data_dir: str | os.PathLike[str], *, workers: int | None = None, use_cache: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The tiers document of ``data_dir`` (computed and stored unless a current one is stored)."""
    if use_cache and (document := stored_tiers(data_dir)) is not None:
        return document
    catalog = Catalog.from_data_dir(data_dir)
    try:
        remaining = sorted(catalog.goals)
    finally:
        catalog.close()
    tiers: dict[str, list[int]] = {}
    for policy in TIER_POLICIES:
        total, done = len(remaining), [0]
        if progress:
            progress(policy, 0, total)

        def advance(n: int, policy: str = policy, total: int = total, done: list[int] = done) -> None:
            done[0] += n
            if progress:
                progress(policy, done[0], total)

        measure = measure_policy(data_dir, policy, remaining, workers=workers, progress=advance)
        failed = set(measure.failed_task_ids)
        tiers[policy] = [t for t in remaining if t not in failed]
        remaining = [t for t in remaining if t in failed]
    tiers["none"] = remaining
    document = {"key": tiers_key(data_dir), "tiers": {t: tiers[t] for t in TIERS},
                "counts": {t: len(tiers[t]) for t in TIERS}}
    atomic_write_bytes(Path(data_dir) / TIERS_FILE, dump_json_file_bytes(document))
    return document


def ensure_tiers(data_dir: str | os.PathLike[str], *,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
    """The catalog's tiers, computed once (saying so on stderr) where none are stored or they are stale: what a
    ``--difficulty`` filter (eval, the CPU recipe) needs before it reads them."""
    if stored_tiers(data_dir) is not None:
        return
    print(f"[shopsimrl] {data_dir} has no difficulty tiers yet: computing them once (`shopsimrl data tiers`)",
          file=sys.stderr, flush=True)
    compute_tiers(data_dir, progress=progress)
