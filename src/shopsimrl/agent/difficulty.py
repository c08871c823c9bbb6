"""Solvability and difficulty of a catalog, measured by playing built-in policies through the page actions.

* solvability: the oracle (reads the private goal) must reach r_success = 1 on every task;
* difficulty: the heuristic (public information only) success rate on the test split.

Episodes are independent, so they are spread over worker processes, each opening the shared data files
once; results are merged in task order, so the figures do not depend on the worker count.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.archive import atomic_write_bytes, dump_json_file_bytes
from ..catalog.retrieval import evaluate_split
from ..catalog.statistics import catalog_shape
from ..catalog.store import Catalog, read_manifest
from ..contract import PURCHASE
from ..env.shop_env import ShopWorld
from .play import play_episode
from .policies import make_policy

CHUNK = 256


@dataclass(frozen=True)
class PolicyMeasure:
    policy: str
    tasks: int
    successes: int
    failed_task_ids: tuple[int, ...]
    steps_mean: float
    wrong_type: int = 0
    """Purchases with r_type < 1 (a product of the wrong type, e.g. a cross-leaf confuser)."""

    @property
    def success_rate(self) -> float:
        return self.successes / self.tasks if self.tasks else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "tasks": self.tasks,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "steps_mean": self.steps_mean,
            "wrong_type": self.wrong_type,
            "failed_task_ids": list(self.failed_task_ids[:50]),
        }


def _play_chunk(
    root: str, policy_name: str, task_ids: Sequence[int], persona: bool | None
) -> list[tuple[int, bool, int, bool]]:
    world = ShopWorld.shared(root)
    env = world.new_env()
    policy = make_policy(policy_name, world)
    out = []
    for task_id in task_ids:
        outcome = play_episode(env, policy, task_id, persona=persona)
        detail = outcome.final.get("reward_detail") or {}
        wrong = detail.get("termination_reason") == PURCHASE and float(detail.get("r_type", 1.0)) < 1.0
        out.append((task_id, outcome.success, len(outcome.actions), wrong))
    return out


def measure_policy(
    root: str | os.PathLike[str],
    policy_name: str,
    task_ids: Sequence[int],
    *,
    persona: bool | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> PolicyMeasure:
    """Play ``policy_name`` on ``task_ids``; ``progress(n)`` is called with the number of finished episodes."""
    root_str = str(Path(root).resolve())
    ids = list(task_ids)
    chunks = [ids[i : i + CHUNK] for i in range(0, len(ids), CHUNK)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(chunks) or 1))
    results: list[tuple[int, bool, int, bool]] = []
    if workers == 1:
        for chunk in chunks:
            results.extend(_play_chunk(root_str, policy_name, chunk, persona))
            if progress:
                progress(len(chunk))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_play_chunk, root_str, policy_name, chunk, persona) for chunk in chunks]
            for future in as_completed(futures):  # advance as chunks finish, not in submission order
                part = future.result()
                results.extend(part)
                if progress:
                    progress(len(part))
    results.sort()
    failed = tuple(task_id for task_id, success, _, _ in results if not success)
    steps = sum(n for _, _, n, _ in results)
    return PolicyMeasure(
        policy=policy_name,
        tasks=len(results),
        successes=len(results) - len(failed),
        failed_task_ids=failed,
        steps_mean=round(steps / len(results), 4) if results else 0.0,
        wrong_type=sum(wrong for *_, wrong in results),
    )


STATS_FILE = "stats.json"
STATS_VERSION = "shopsimrl-catalog-stats-v2"


def _cache_key(data_sha256: str, oracle_tasks: int) -> dict[str, Any]:
    return {"stats_version": STATS_VERSION, "data_sha256": data_sha256, "oracle_tasks": oracle_tasks}


def cached_statistics(root: str | os.PathLike[str], *, oracle_sample: int | None = None) -> dict[str, Any] | None:
    """The statistics ``stats.json`` holds for this data directory and settings, or None; reads only
    ``manifest.json`` and ``stats.json`` (the catalog is not opened: a cached answer takes milliseconds)."""
    root = Path(root)
    try:
        manifest = read_manifest(root)
        cached = json.loads((root / STATS_FILE).read_text("utf-8"))
        active = int(manifest["stats"]["active_task_count"])
        data_sha256 = str(manifest["output_data_sha256"])
    except (OSError, ValueError, KeyError, TypeError):  # DataError is a ValueError
        return None
    tasks = min(oracle_sample, active) if oracle_sample else active
    if not isinstance(cached, dict) or cached.get("cache_key") != _cache_key(data_sha256, tasks):
        return None
    stats = cached.get("stats")
    return stats if isinstance(stats, dict) else None


def data_statistics(
    root: str | os.PathLike[str],
    *,
    oracle_sample: int | None = None,
    workers: int | None = None,
    use_cache: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Shape, retrieval proxy, oracle solvability and heuristic difficulty of a prepared directory.

    The result is cached in ``root/stats.json`` keyed by the data hash and the measurement settings.
    ``oracle_sample`` limits the oracle to the first N task ids (default: every active task).
    ``progress(label, done, total)`` reports episodes as they finish.
    """
    root = Path(root)
    if use_cache:
        cached = cached_statistics(root, oracle_sample=oracle_sample)
        if cached is not None:
            return cached
    catalog = Catalog.from_data_dir(root)
    shape = catalog_shape(root, catalog)
    all_ids = sorted(catalog.goals)
    oracle_ids = all_ids[:oracle_sample] if oracle_sample else all_ids
    key = _cache_key(shape["data_sha256"], len(oracle_ids))
    cache = root / STATS_FILE

    def reporter(label: str, total: int) -> Callable[[int], None]:
        done = [0]
        if progress:  # show the bar at once: worker start-up and the first chunk take seconds
            progress(label, 0, total)

        def advance(n: int) -> None:
            done[0] += n
            if progress:
                progress(label, done[0], total)

        return advance

    test_ids = list(catalog.split("test"))
    oracle = measure_policy(root, "oracle", oracle_ids, workers=workers, progress=reporter("oracle", len(oracle_ids)))
    public = measure_policy(root, "heuristic", test_ids, workers=workers, progress=reporter("heuristic", len(test_ids)))
    retrieval = evaluate_split(root, "test", top_k=150)["metrics"]
    from ..generate.decidable import catalog_decidability  # generator vocabulary: loaded only for statistics

    stats = {
        **shape,
        **catalog_decidability(catalog.goals, catalog.product_record),
        "oracle_success": oracle.success_rate,
        "oracle": oracle.as_dict(),
        "public_success": public.success_rate,
        "public": {**public.as_dict(), "split": "test"},
        "recall_at_20_simple": retrieval["simple"]["recall_at_20"],
        "recall_at_20_full": retrieval["full"]["recall_at_20"],
        "retrieval": retrieval,
    }
    atomic_write_bytes(cache, dump_json_file_bytes({"cache_key": key, "stats": stats}))
    return stats
