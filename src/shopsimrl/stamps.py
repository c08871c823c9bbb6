"""Version stamps: which environment, catalog generator, catalog content and task set a result was made on.

Every trace, summary, report, OpenEnv metadata and verifiers output carries the same four stamps, so two numbers
can be checked for comparability without reading their plans: ``environment_version`` (the behavioural contract),
``generator_version`` (the catalog generator that made the catalog's source archive; ``None`` for a catalog that
was not generated, such as ShopSimulator's own data or the test fixture), ``catalog_sha256`` (the cleaned
catalog's content hash, ``output_data_sha256`` of its manifest) and ``task_set_sha256`` (SHA-256 of the sorted
``[split, task_id]`` pairs evaluated, or of one split's task ids). ``compare`` refuses runs whose stamps differ.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .versions import ENVIRONMENT_VERSION

STAMP_KEYS = ("environment_version", "generator_version", "catalog_sha256", "task_set_sha256")


def generator_version(root: str | os.PathLike[str], manifest: Mapping[str, Any]) -> str | None:
    """The generator version of a prepared directory's source archive, when the archive's own manifest (beside it
    in ``source/``, as ``data build-default`` writes it) names the very archive that was prepared."""
    name = manifest.get("source_archive")
    if not isinstance(name, str):
        return None
    try:
        source = json.loads((Path(root) / "source" / f"{name}.manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(source, dict) or source.get("archive_sha256") != manifest.get("source_archive_sha256"):
        return None
    version = source.get("generator_version")
    return version if isinstance(version, str) else None


def task_set_sha256(tasks: Iterable[tuple[str, int]]) -> str:
    """SHA-256 of the sorted, distinct ``[split, task_id]`` pairs (repeats and order do not change it)."""
    pairs = sorted({(str(split), int(task)) for split, task in tasks})
    payload = json.dumps([list(pair) for pair in pairs], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def catalog_stamps(root: str | os.PathLike[str], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The three stamps of a served catalog (the task set is the caller's: a split, a run's jobs)."""
    return {"environment_version": ENVIRONMENT_VERSION, "generator_version": generator_version(root, manifest),
            "catalog_sha256": manifest.get("output_data_sha256")}


def plan_stamps(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The four stamps of a run plan (``generator_version`` is ``None`` for plans made before it was recorded)."""
    environment = plan.get("environment") or {}
    catalog = environment.get("catalog") or {}
    jobs = plan.get("jobs") or []
    return {"environment_version": environment.get("environment_version"),
            "generator_version": catalog.get("generator_version"), "catalog_sha256": catalog.get("data_sha256"),
            "task_set_sha256": task_set_sha256((job["split"], job["task_id"]) for job in jobs)}


def stamp_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """One line per stamp that differs between ``a`` and ``b``."""
    return [f"{key} {a.get(key)} vs {b.get(key)}" for key in STAMP_KEYS if a.get(key) != b.get(key)]
