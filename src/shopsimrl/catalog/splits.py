"""Project persona splits (docs/contract.md#splits): exact-size, leak-free train/val/test allocation.

Tasks that share an ASIN, a (normalised) instruction, a persona or a user are linked into one group, and
whole groups are allocated, so no shared persona/product crosses a held-out boundary. The ranking and the
subset-sum order follow the reference policy exactly, so the real cleaned archive reproduces the published
id lists with the default seed.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DataError
from ..versions import PERSONA_SPLITS_POLICY, PERSONA_SPLITS_VERSION

DEFAULT_SEED = 20260829
DEFAULT_TEST_SIZE = 400
DEFAULT_VAL_SIZE = 400
HELD_OUT_MAX_GROUP_SIZE = 20
DEFAULT_SIZES_AT = 4526
"""Persona tasks of the real archive: at or above this count the default split sizes are 400/400."""
NORMALIZATION = "unicode-nfkc-casefold-whitespace-v1"
GROUP_KEYS = ("asin", "instruction_simple", "instruction", "persona_fingerprint", "user_id")
_USER_ID_NAMES = {"userid", "user_id", "用户id", "用户_id"}
_WHITESPACE = re.compile(r"\s+")


def normalize_text(value: object) -> str:
    """NFKC, casefold, whitespace runs collapsed to one space, stripped."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", str(value)).casefold()).strip()


def _without_reasoning(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_reasoning(v) for k, v in value.items() if k != "__reasoning__"}
    if isinstance(value, list):
        return [_without_reasoning(v) for v in value]
    return value


def persona_fingerprint(persona: Mapping[str, Any]) -> str:
    payload = json.dumps(_without_reasoning(persona), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def persona_user_id(persona: Mapping[str, Any]) -> str:
    for key, value in persona.items():
        if normalize_text(key).replace(" ", "") in _USER_ID_NAMES:
            return "" if value is None else normalize_text(value)
    return ""


@dataclass(frozen=True, slots=True)
class PersonaTask:
    """What the split policy needs to know about one persona task."""

    task_id: int
    asin: str
    instruction_simple: str
    instruction: str
    persona: Mapping[str, Any]

    def group_values(self) -> tuple[tuple[str, str], ...]:
        values = (
            ("asin", normalize_text(self.asin)),
            ("instruction_simple", normalize_text(self.instruction_simple)),
            ("instruction", normalize_text(self.instruction)),
            ("persona_fingerprint", persona_fingerprint(self.persona)),
            ("user_id", persona_user_id(self.persona)),
        )
        return tuple((key, value) for key, value in values if value)


@dataclass(frozen=True, slots=True)
class TaskGroup:
    group_id: str
    task_ids: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.task_ids)


def link_groups(tasks: Sequence[PersonaTask]) -> list[TaskGroup]:
    """Connected components over shared (key, value) pairs; sorted by group id."""
    parent: dict[int, int] = {task.task_id: task.task_id for task in tasks}

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(a: int, b: int) -> None:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:  # the smaller task id is the root
            parent[max(root_a, root_b)] = min(root_a, root_b)

    owner: dict[tuple[str, str], int] = {}
    for task in tasks:
        for pair in task.group_values():
            if pair in owner:
                union(owner[pair], task.task_id)
            else:
                owner[pair] = task.task_id
    members: dict[int, list[int]] = {}
    for task in tasks:
        members.setdefault(find(task.task_id), []).append(task.task_id)
    groups = []
    for ids in members.values():
        ids.sort()
        digest = hashlib.sha256(",".join(str(i) for i in ids).encode("ascii")).hexdigest()[:16]
        groups.append(TaskGroup("group-" + digest, tuple(ids)))
    groups.sort(key=lambda group: group.group_id)
    return groups


def _rank_key(seed: int, split: str, group_id: str) -> str:
    return hashlib.sha256(f"{seed}:{split}:{group_id}".encode()).hexdigest()


def select_exact(
    groups: Sequence[TaskGroup],
    target: int,
    *,
    seed: int,
    split: str,
    max_group_size: int,
    excluded_task_ids: frozenset[int] = frozenset(),
) -> list[TaskGroup]:
    """Whole groups summing to exactly ``target`` tasks: 0/1 subset-sum in hash-rank order (docs/contract.md#splits)."""
    if target == 0:
        return []
    ranked = sorted(groups, key=lambda group: _rank_key(seed, split, group.group_id))
    candidates = [
        group
        for group in ranked
        if group.size <= max_group_size and not (excluded_task_ids and excluded_task_ids.intersection(group.task_ids))
    ]
    reachable: dict[int, tuple[int, int] | None] = {0: None}
    for position, group in enumerate(candidates):
        for total in sorted(reachable, reverse=True):
            new_total = total + group.size
            if new_total <= target and new_total not in reachable:
                reachable[new_total] = (total, position)
        if target in reachable:
            break
    if target not in reachable:
        available = sum(group.size for group in candidates)
        raise DataError(
            f"cannot select exactly {target} {split} tasks from {len(candidates)} eligible groups "
            f"({available} tasks in groups of at most {max_group_size}); use a smaller --{split}-size", code="invalid_split"
        )
    chosen: list[TaskGroup] = []
    total = target
    while total:
        back = reachable[total]
        assert back is not None
        total, position = back
        chosen.append(candidates[position])
    return chosen


def _ids_sha256(ids: Sequence[int]) -> str:
    return hashlib.sha256(json.dumps(list(ids), separators=(",", ":")).encode("ascii")).hexdigest()


def _split_entry(role: str, groups: Sequence[TaskGroup], source_counts: Mapping[str, int]) -> dict[str, Any]:
    ids = sorted(task_id for group in groups for task_id in group.task_ids)
    return {
        "persona": True,
        "role": role,
        "task_ids": ids,
        "task_count": len(ids),
        "task_ids_sha256": _ids_sha256(ids),
        "source_split_counts": dict(source_counts),
        "group_count": len(groups),
        "multi_task_group_count": sum(1 for group in groups if group.size > 1),
        "max_group_size": max((group.size for group in groups), default=0),
    }


def default_split_size(persona_tasks: int, size: int = DEFAULT_TEST_SIZE) -> int:
    """The default held-out size for a catalog: 400 at the real archive's scale, proportionally fewer below."""
    return min(size, round(persona_tasks * size / DEFAULT_SIZES_AT))


def _self_checks(
    task_list: Sequence[PersonaTask], groups: Sequence[TaskGroup], splits: Mapping[str, Any], excluded: frozenset[int]
) -> dict[str, Any]:
    """The manifest's ``checks``: every task in exactly one split, linked groups never split, test exclusions
    kept; a failed check raises ``DataError`` (``invalid_split``)."""
    all_ids = [task.task_id for task in task_list]
    id_sets = {name: set(entry["task_ids"]) for name, entry in splits.items()}
    group_of = {task_id: group.group_id for group in groups for task_id in group.task_ids}
    group_sets = {name: {group_of[t] for t in ids} for name, ids in id_sets.items()}
    checks = {
        "persona_task_count": len(all_ids),
        "complete_coverage": set().union(*id_sets.values()) == set(all_ids),
        "pairwise_task_disjoint": sum(len(s) for s in id_sets.values()) == len(set().union(*id_sets.values())),
        "linked_groups_disjoint": sum(len(s) for s in group_sets.values()) == len(set().union(*group_sets.values())),
        "test_exclusions_respected": not (id_sets["test"] & excluded),
    }
    if not all(value for key, value in checks.items() if key != "persona_task_count"):
        raise DataError(f"split self-check failed: {checks}", code="invalid_split")
    return checks


def build_persona_splits(
    tasks: Iterable[PersonaTask],
    *,
    seed: int = DEFAULT_SEED,
    test_size: int | None = None,
    val_size: int | None = None,
    held_out_max_group_size: int = HELD_OUT_MAX_GROUP_SIZE,
    test_excluded_task_ids: Iterable[int] = (),
    source: Mapping[str, Any] | None = None,
    source_split_of: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """Build the ``shopsimrl-persona-splits-v1`` manifest (explicit sorted id lists with their SHA-256)."""
    task_list = list(tasks)
    if test_size is None:  # not given: scaled with the catalog (small generated catalogs need no flags)
        test_size = default_split_size(len(task_list), DEFAULT_TEST_SIZE)
    if val_size is None:
        val_size = default_split_size(len(task_list), DEFAULT_VAL_SIZE)
    if test_size < 0 or val_size < 0:
        raise DataError("split sizes must be non-negative", code="invalid_split")
    if test_size + val_size > len(task_list):
        raise DataError(
            f"the catalog has {len(task_list)} persona tasks, too few for --test-size {test_size} "
            f"and --val-size {val_size}", code="invalid_split"
        )
    excluded = frozenset(test_excluded_task_ids)
    groups = link_groups(task_list)
    test = select_exact(
        groups, test_size, seed=seed, split="test", max_group_size=held_out_max_group_size, excluded_task_ids=excluded
    )
    taken = {group.group_id for group in test}
    rest = [group for group in groups if group.group_id not in taken]
    val = select_exact(rest, val_size, seed=seed, split="val", max_group_size=held_out_max_group_size)
    taken.update(group.group_id for group in val)
    train = [group for group in groups if group.group_id not in taken]

    def source_counts(selected: Sequence[TaskGroup]) -> dict[str, int]:
        counts: dict[str, int] = {}
        if source_split_of:
            for group in selected:
                for task_id in group.task_ids:
                    name = source_split_of.get(task_id, "unassigned")
                    counts[name] = counts.get(name, 0) + 1
        return dict(sorted(counts.items()))

    splits = {
        "test": _split_entry("test", test, source_counts(test)),
        "val": _split_entry("val", val, source_counts(val)),  # the reference builder's role names
        "train": _split_entry("train", train, source_counts(train)),
    }
    checks = _self_checks(task_list, groups, splits, excluded)
    return {
        "schema_version": PERSONA_SPLITS_VERSION,
        "version": PERSONA_SPLITS_VERSION,
        "policy": {
            "version": PERSONA_SPLITS_POLICY,
            "seed": seed,
            "allocation_order": ["test", "val", "train"],
            "validation_size": val_size,
            "test_size": test_size,
            "held_out_max_group_size": held_out_max_group_size,
            "normalization": NORMALIZATION,
            "group_keys": list(GROUP_KEYS),
            "test_excluded_task_ids": sorted(excluded),
        },
        "grouping": {
            "group_count": len(groups),
            "multi_task_group_count": sum(1 for group in groups if group.size > 1),
            "max_group_size": max((group.size for group in groups), default=0),
        },
        "source": dict(source or {}),
        "checks": checks,
        "splits": splits,
    }
