"""Precomputed budget annotations (env_spec §2.4) read for `shopsimrl data prepare --annotations FILE`.

The file is a JSON list of records ``{task_id, task_uid, asin, source_field, evidence, kind, amount,
approximate_upper_multiplier, price_upper}``. Every record is checked against the §2.4 rules (the
ceiling follows from kind and amount) so that a hand-edited or truncated file fails loudly, naming the
record, instead of silently changing budgets.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from shopsimrl.budget.parser import APPROXIMATE_MULTIPLIER, UPPER_KINDS
from shopsimrl.errors import ArchiveError

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


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


def _validate(record: object) -> tuple[int, float | None]:
    if not isinstance(record, Mapping):
        raise ValueError(f"record is {type(record).__name__}, not an object")
    task_id = record.get("task_id")
    if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
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
    """Map task_id → precomputed price_upper (None: let the runtime parser decide, §2.4)."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchiveError(f"cannot read budget annotations {source}: {exc}") from exc
    except RecursionError:
        raise ArchiveError(f"cannot read budget annotations {source}: nested too deeply") from None
    if not isinstance(data, list):
        raise ArchiveError(f"budget annotations {source}: top level must be a list of records")
    annotations: dict[int, float | None] = {}
    for index, record in enumerate(data):
        try:
            task_id, price_upper = _validate(record)
        except ValueError as exc:
            raise ArchiveError(f"budget annotations {source}: record {index}: {exc}") from None
        if task_id in annotations:
            raise ArchiveError(f"budget annotations {source}: record {index}: duplicate task_id {task_id}")
        annotations[task_id] = price_upper
    return annotations
