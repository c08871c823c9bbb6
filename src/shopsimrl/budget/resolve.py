"""Goal-level price ceiling: precomputed annotation first, then the text parser (docs/contract.md#budget-resolution)."""

from __future__ import annotations

import math

from shopsimrl.budget.parser import parse_budget

from ..errors import DataError


def validate_precomputed_price_upper(value: object, *, asin: str | None = None) -> float:
    """``float(value)``, refusing anything that is not a finite number ≥ 0 (booleans included)."""
    where = f" for ASIN {asin}" if asin is not None else ""
    if isinstance(value, bool):
        raise DataError(f"invalid precomputed price_upper{where}: {value!r}", code="archive")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f"invalid precomputed price_upper{where}: {value!r}", code="archive") from None
    if not math.isfinite(number) or number < 0:
        raise DataError(f"invalid precomputed price_upper{where}: {value!r}", code="archive")
    return number


def resolve_price_upper(
    precomputed: object,
    instruction_simple: str | None,
    instruction: str | None,
    *,
    asin: str | None = None,
) -> float | None:
    """The ceiling a goal gets; None means "no budget" (r_price = 1).

    1. A precomputed value that is not None and not ``""`` wins, even over a budget in the text; it must be
       a finite number ≥ 0 (else ``DataError`` (``archive``), a ``ValueError``, naming the ASIN when given).
    2. Otherwise the simple text (the full one when the simple text is empty) is parsed.
    3. If that finds nothing and the simple text differs from the full one, the full text is parsed.

    The gold product's price is never consulted.
    """
    if precomputed is not None and precomputed != "":
        return validate_precomputed_price_upper(precomputed, asin=asin)
    simple = instruction_simple or instruction
    found = parse_budget(simple)
    if found is None and instruction and simple != instruction:
        found = parse_budget(instruction)
    return found
