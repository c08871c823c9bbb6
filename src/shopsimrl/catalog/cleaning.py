"""Cleaning the source archive (docs/contract.md#price-axes, #task-ids): stable task ids, price-axis exclusion, budgets applied.

Task ids are assigned before filtering, so excluded products leave gaps and ids stay comparable with the
reference. A product with two or more price-affecting axes cannot have its SKU price resolved safely, so it
is excluded together with its tasks, and the exclusion is recorded for audit.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataError
from ..versions import MAX_PRICE_AFFECTING_AXES
from .options import price_affecting_axes
from .records import Product

EXCLUSION_REASON = "multiple_price_affecting_axes"


def task_uid_for(asin: str, instruction_index: int, instruction: str) -> str:
    """``shopsim-`` + the first 24 hex chars of the SHA-256 of ``[asin, index, instruction]`` (compact JSON)."""
    payload = json.dumps([asin, instruction_index, instruction], ensure_ascii=False, separators=(",", ":"))
    return "shopsim-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Exclusion:
    asin: str
    price_affecting_axes: tuple[str, ...]
    reason: str
    source_product_index: int
    task_ids: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "asin": self.asin,
            "price_affecting_axes": list(self.price_affecting_axes),
            "reason": self.reason,
            "source_product_index": self.source_product_index,
            "task_ids": list(self.task_ids),
        }


@dataclass
class CleaningResult:
    records: list[dict[str, Any]]
    exclusions: list[Exclusion]
    source_product_count: int
    source_task_count: int
    persona_task_ids: list[int] = field(default_factory=list)
    standard_task_ids: list[int] = field(default_factory=list)
    annotated_task_ids: list[int] = field(default_factory=list)

    @property
    def active_task_count(self) -> int:
        return len(self.persona_task_ids) + len(self.standard_task_ids)


class Cleaner:
    """``clean_products`` one product at a time (task-id counter and used ids carried), for streaming prepare."""

    def __init__(
        self,
        annotations: Mapping[int, float | None] | None = None,
        max_price_affecting_axes: int = MAX_PRICE_AFFECTING_AXES,
    ) -> None:
        self.annotations = annotations or {}
        self.max_price_affecting_axes = max_price_affecting_axes
        self.counter = 0
        self.used_ids: set[int] = set()
        self.exclusions: list[Exclusion] = []
        self.persona_ids: list[int] = []
        self.standard_ids: list[int] = []
        self.annotated: list[int] = []
        self.task_count = 0
        self.product_count = 0

    def add(self, product: Product) -> dict[str, Any] | None:
        """The cleaned record of ``product``, or None when it is excluded (recorded in ``exclusions``)."""
        self.product_count += 1
        source_index = product.source_product_index if product.source_product_index is not None else product.index
        record = copy.deepcopy(dict(product.raw))
        record["source_product_index"] = source_index
        task_ids: list[int] = []
        new_instructions: list[dict[str, Any]] = []
        for instruction, raw in zip(product.instructions, record["instructions"], strict=True):
            self.task_count += 1
            task_id = instruction.task_id if instruction.task_id is not None else self.counter
            self.counter = max(self.counter, task_id) + 1
            if task_id in self.used_ids:
                raise DataError(f"duplicate task_id {task_id} at record {product.index} (asin {product.asin})", code="dataset_build")
            self.used_ids.add(task_id)
            task_ids.append(task_id)
            raw = dict(raw)
            raw.pop("price_constraint", None)
            raw["task_id"] = task_id
            raw["instruction_index"] = instruction.instruction_index
            raw["task_uid"] = instruction.task_uid or task_uid_for(
                product.asin, instruction.instruction_index, instruction.instruction
            )
            raw.setdefault("instruction_options", [])
            raw["instruction_simple"] = instruction.instruction_simple
            price_upper = instruction.price_upper
            if task_id in self.annotations:
                price_upper = self.annotations[task_id]
                self.annotated.append(task_id)
            raw["price_upper"] = price_upper
            new_instructions.append(raw)
        record["instructions"] = new_instructions
        axes = price_affecting_axes(product.customization_options)
        if len(axes) > self.max_price_affecting_axes:
            self.exclusions.append(
                Exclusion(product.asin, tuple(axes), EXCLUSION_REASON, source_index, tuple(task_ids))
            )
            return None
        for task_id, instruction in zip(task_ids, product.instructions, strict=True):
            if not instruction.attributes:
                continue  # an instruction without attributes is not an active task (docs/contract.md#private-goal)
            (self.persona_ids if product.is_persona else self.standard_ids).append(task_id)
        return record

    def result(self, records: list[dict[str, Any]]) -> CleaningResult:
        return CleaningResult(
            records=records,
            exclusions=self.exclusions,
            source_product_count=self.product_count,
            source_task_count=self.task_count,
            persona_task_ids=sorted(self.persona_ids),
            standard_task_ids=sorted(self.standard_ids),
            annotated_task_ids=sorted(self.annotated),
        )


def clean_products(
    products: Sequence[Product],
    *,
    annotations: Mapping[int, float | None] | None = None,
    max_price_affecting_axes: int = MAX_PRICE_AFFECTING_AXES,
) -> CleaningResult:
    """Assign stable ids, exclude multi-price-axis products, apply precomputed budgets; never mutates the input.

    ``annotations`` maps task id → precomputed ``price_upper`` (persona budget annotations); a value there
    replaces the instruction's ``price_upper``. Instructions that already carry ids keep them.
    """
    cleaner = Cleaner(annotations, max_price_affecting_axes)
    records = [record for product in products if (record := cleaner.add(product)) is not None]
    return cleaner.result(records)
