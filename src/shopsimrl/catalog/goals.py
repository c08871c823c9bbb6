"""Private goals (docs/contract.md#private-goal): what a purchase is scored against; never shown to the agent."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..budget import resolve_price_upper
from ..errors import DataError
from .plain_copy import plain_copy
from .records import Product


def strip_reasoning(persona: Mapping[str, Any] | None) -> dict[str, Any]:
    """The public persona: a copy without the internal ``__reasoning__`` key."""
    if not isinstance(persona, Mapping):
        return {}
    return {key: plain_copy(value) for key, value in persona.items() if key != "__reasoning__"}


@dataclass(frozen=True, slots=True)
class GoalSkips:
    products_without_instructions: int
    instructions_without_attributes: int


def build_goals(products: Iterable[Product]) -> tuple[dict[int, dict[str, Any]], GoalSkips]:
    """Goals by task id, built in file order; instructions without attributes are inactive."""
    goals: dict[int, dict[str, Any]] = {}
    skipped_products = 0
    skipped_instructions = 0
    for product in products:
        if not product.instructions:
            skipped_products += 1
            continue
        persona = dict(product.user_persona) if isinstance(product.user_persona, Mapping) else {}
        for instruction, raw in zip(product.instructions, product.raw["instructions"], strict=True):
            if not instruction.attributes:
                skipped_instructions += 1
                continue
            task_id = instruction.task_id if instruction.task_id is not None else len(goals)
            if task_id in goals:
                raise DataError(f"duplicate task_id in product corpus: {task_id}", code="dataset_build")
            price_upper = resolve_price_upper(
                instruction.price_upper, instruction.instruction_simple, instruction.instruction, asin=product.asin
            )
            goals[task_id] = {
                "task_id": task_id,
                "task_uid": instruction.task_uid,
                "source_product_index": product.source_product_index,
                "asin": product.asin,
                "category": product.category,
                "name": product.title,
                "instruction_text": instruction.instruction,
                "instruction_simple": instruction.instruction_simple or instruction.instruction,
                "attributes": list(instruction.attributes),
                "price_upper": price_upper,
                "price_constraint": copy.deepcopy(raw.get("price_constraint")),
                "goal_options": list(instruction.instruction_options),
                "user_persona": copy.deepcopy(persona),
                "reason_key": copy.deepcopy(product.raw.get("reason_key")),
                "weight": 1,
            }
    return goals, GoalSkips(skipped_products, skipped_instructions)
