"""Typed views of the ShopSimulator archive records (docs/contract.md#catalog-archive).

The archive stays the canonical form (a list of JSON objects); these frozen views are what the rest of the
package reads, so field access is checked once, at load time, instead of at every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Instruction:
    """One purchase request attached to a product (one product normally has exactly one)."""

    instruction: str
    instruction_simple: str | None
    attributes: tuple[str, ...]
    instruction_options: tuple[str, ...]
    price_upper: float | None
    task_id: int | None
    task_uid: str | None
    instruction_index: int


@dataclass(frozen=True, slots=True)
class Product:
    """A catalog product with its instructions; ``raw`` is the archive record it was read from."""

    index: int
    asin: str
    title: str
    shop_name: str
    category: str
    product_category: str
    pricing: tuple[float, ...]
    attributes: tuple[str, ...]
    user_persona: Mapping[str, Any] | None
    instructions: tuple[Instruction, ...]
    source_product_index: int | None
    raw: Mapping[str, Any]

    @property
    def is_persona(self) -> bool:
        return bool(self.user_persona)

    @property
    def customization_options(self) -> Mapping[str, Any]:
        options = self.raw.get("customization_options")
        return options if isinstance(options, Mapping) else {}
