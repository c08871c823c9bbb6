"""Precomputed budget annotations (docs/contract.md#budget-annotations) read for `shopsimrl data prepare --annotations FILE`.

The file is a JSON list of records ``{task_id, task_uid, asin, source_field, evidence, kind, amount,
approximate_upper_multiplier, price_upper}``. Every record is checked against the docs/contract.md#budget-annotations rules (the
ceiling follows from kind and amount) so that a hand-edited or truncated file fails loudly, naming the
record, instead of silently changing budgets. Annotations are keyed by ``task_id``, which every archive
numbers from 0, so a file made for another archive would fit any catalog: when a record carries ``asin``
or ``task_uid``, :func:`check_annotation_identities` compares them with the task of that id and refuses
the file on any mismatch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shopsimrl.budget.parser import APPROXIMATE_MULTIPLIER, UPPER_KINDS
from shopsimrl.contract import is_task_id

from ..errors import DataError

ANNOTATION_KINDS = frozenset(
    {
        "hard_upper",
        "approximate_upper",
        "no_budget",
        "lower_only",
        "non_total_price",
        "ambiguous",
        "runtime_regex_fallback",
    }
)
SOURCE_FIELDS = frozenset({"instruction_simple", "instruction"})
EXAMPLE_RECORD = (
    '{"task_id": 0, "kind": "approximate_upper", "amount": 1000, "price_upper": 1100.0, '
    '"evidence": "价格在1000元左右", "source_field": "instruction_simple", "asin": "B0001", "task_uid": null}'
)
FORMAT_HINT = (
    f"the file is a JSON list of records like {EXAMPLE_RECORD}: hard_upper has price_upper = amount, "
    f"approximate_upper round(amount * 1.1, 8), both with non-empty evidence; the other kinds "
    f"({', '.join(sorted(ANNOTATION_KINDS - UPPER_KINDS))}) have null amount and price_upper (no_budget: empty "
    f"evidence); source_field, asin and task_uid are optional"
)
"""Shown with every format error, so the whole record format is learnt from the first one (docs/contract.md#budget-annotations)."""


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


@dataclass(frozen=True)
class AnnotationIdentity:
    """What an annotation says about the task it was made for (None: the record does not say)."""

    asin: str | None
    task_uid: str | None


def _optional_text(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    return value or None


def _validate(record: object) -> tuple[int, float | None]:
    if not isinstance(record, Mapping):
        raise ValueError(f"record is {type(record).__name__}, not an object")
    task_id = record.get("task_id")
    if not is_task_id(task_id) or task_id < 0:
        raise ValueError(f"task_id must be a non-negative integer, got {task_id!r}")
    kind = record.get("kind")
    if kind not in ANNOTATION_KINDS:
        raise ValueError(f"kind {kind!r} is not one of {sorted(ANNOTATION_KINDS)}")
    source_field = record.get("source_field")
    if source_field is not None and source_field not in SOURCE_FIELDS:
        raise ValueError(f"source_field {source_field!r} is not one of {sorted(SOURCE_FIELDS)}")
    evidence = record.get("evidence", "")
    if not isinstance(evidence, str):
        raise ValueError(f"evidence must be a string, got {evidence!r}")
    amount = _number(record.get("amount"))
    price_upper = _number(record.get("price_upper"))
    if kind in UPPER_KINDS:
        if amount is None or amount <= 0:
            raise ValueError(f"{kind} needs an amount > 0, got {amount!r}")
        if not evidence:
            raise ValueError(f"{kind} needs non-empty evidence")
        expected = amount if kind == "hard_upper" else round(amount * APPROXIMATE_MULTIPLIER, 8)
        if price_upper is None or round(price_upper, 8) != expected:
            raise ValueError(f"price_upper {price_upper!r} does not follow from {kind} amount {amount!r}")
        return task_id, expected
    if amount is not None or price_upper is not None:
        raise ValueError(f"{kind} must have null amount and price_upper")
    if kind == "no_budget" and evidence:
        raise ValueError("no_budget must have empty evidence")
    return task_id, None


def load_budget_annotations(path: str | Path) -> dict[int, float | None]:
    """Map task_id → precomputed price_upper (None: let the runtime parser decide, docs/contract.md#budget-annotations)."""
    return {task_id: price for task_id, (price, _) in _load(path).items()}


def load_annotation_identities(path: str | Path) -> dict[int, AnnotationIdentity]:
    """Map task_id → the ``asin`` / ``task_uid`` the annotation names (validated like the budgets)."""
    return {task_id: identity for task_id, (_, identity) in _load(path).items()}


def check_annotation_identities(
    path: str | Path, tasks: Mapping[int, tuple[str, str]], *, shown: int = 5
) -> None:
    """Refuse annotations made for another archive.

    ``tasks`` maps each task id of the archive being prepared to its ``(asin, task_uid)``. An annotation
    whose task id is not in the archive, or whose ``asin`` / ``task_uid`` (when it carries them) differ
    from that task's, is a mismatch; all of them are counted and the first ``shown`` are named.
    """
    problems: list[str] = []
    for task_id, identity in sorted(load_annotation_identities(path).items()):
        if task_id not in tasks:
            problems.append(f"task_id {task_id} is not a task of this archive")
            continue
        asin, task_uid = tasks[task_id]
        if identity.asin is not None and identity.asin != asin:
            problems.append(f"task_id {task_id}: annotation asin {identity.asin} != archive asin {asin}")
        elif identity.task_uid is not None and identity.task_uid != task_uid:
            problems.append(f"task_id {task_id}: annotation task_uid {identity.task_uid} != archive {task_uid}")
    if problems:
        more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
        raise DataError(
            f"budget annotations {path} do not belong to this archive: {len(problems)} of "
            f"{len(load_annotation_identities(path))} records mismatch: {'; '.join(problems[:shown])}{more}", code="archive"
        )


def task_identities(records: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, str]]:
    """``task_id → (asin, task_uid)`` of cleaned archive records (ids and uids assigned)."""
    return {
        instruction["task_id"]: (record["asin"], instruction["task_uid"])
        for record in records for instruction in record["instructions"]
    }


def _load(path: str | Path) -> dict[int, tuple[float | None, AnnotationIdentity]]:
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read budget annotations {source}: {exc}", code="archive") from exc
    except RecursionError:
        raise DataError(f"cannot read budget annotations {source}: nested too deeply", code="archive") from None
    if not isinstance(data, list):
        raise DataError(f"budget annotations {source}: top level must be a list of records; {FORMAT_HINT}", code="archive")
    annotations: dict[int, tuple[float | None, AnnotationIdentity]] = {}
    for index, record in enumerate(data):
        try:
            task_id, price_upper = _validate(record)
            identity = AnnotationIdentity(_optional_text(record, "asin"), _optional_text(record, "task_uid"))
        except ValueError as exc:
            raise DataError(f"budget annotations {source}: record {index}: {exc}; {FORMAT_HINT}", code="archive") from None
        if task_id in annotations:
            raise DataError(f"budget annotations {source}: record {index}: duplicate task_id {task_id}", code="archive")
        annotations[task_id] = (price_upper, identity)
    return annotations
