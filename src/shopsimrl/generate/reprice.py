"""Confusers priced around their target's budget (issue 41 item 1: "confusers are priced around the budget too").

A confuser is another leaf's product dressed as a rival of the target; at its own leaf's price a third of them
would cost more than the target's ceiling and the budget alone would rule them out (median lowest price over the
ceiling 0.49, the gold's own about 0.72). So every SKU of a confuser is scaled so that its own gold SKU sits where
a target's gold sits under that ceiling: the ceiling over the new price is drawn like ``budgets.near_ceiling`` draws
a gold's ceiling. The option price structure is kept (the same distinct prices, in the same order, re-rounded as
shops list them), and the confuser's own task gets a new budget of its kind and a new instruction, so it still
admits its own gold SKU.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .budgets import UPPER_KINDS, make_budget, near_ceiling
from .instructions import Requirements, full_instruction
from .option_prices import taobao_price
from .products import ProductDraft
from .vocabulary import Vocabulary


class _Store(Protocol):
    def get(self, position: int) -> tuple[ProductDraft, Requirements, str]: ...

    def put(self, position: int, item: tuple[ProductDraft, Requirements, str]) -> None: ...


def budget_level(target: ProductDraft, req: Requirements, rng: random.Random) -> float:
    """The price a gold SKU would have under the target's ceiling (its gold's price when it states none)."""
    ceiling = req.budget.ceiling
    if ceiling is None:
        return target.gold_price
    kind = req.budget.kind if req.budget.kind in UPPER_KINDS else "hard_upper"
    return ceiling / near_ceiling(1.0, kind, rng)


def price_map(prices: Iterable[float], factor: float, rng: random.Random) -> dict[float, float]:
    """Each distinct price times ``factor``, re-rounded (``taobao_price``) and kept strictly rising in the old order."""
    mapping: dict[float, float] = {}
    last = 0.0
    for old in sorted(set(prices)):
        new = taobao_price(old * factor, rng)
        if new <= last:
            new = round(last + max(1.0, last * 0.05), 2)
        mapping[old] = last = new
    return mapping


def _record_prices(record: Mapping[str, Any]) -> list[float]:
    options: Mapping[str, list[dict[str, Any]]] = record["customization_options"]
    listed = [float(e["price"]) for es in options.values() for e in es if e.get("price") is not None]
    return listed + [float(p) for p in record["pricing"]]


def reprice(draft: ProductDraft, level: float, rng: random.Random) -> None:
    """Scale every SKU of ``draft`` in place so that its gold SKU costs about ``level``."""
    mapping = price_map(_record_prices(draft.record), level / draft.gold_price, rng)
    for entries in draft.record["customization_options"].values():
        for entry in entries:
            if entry.get("price") is not None:
                entry["price"] = mapping[float(entry["price"])]
    draft.record["pricing"] = [mapping[float(p)] for p in draft.record["pricing"]]
    draft.gold_price = mapping[draft.gold_price]
    draft.dearer_price = None if draft.dearer_price is None else mapping[draft.dearer_price]


def reprice_confusers(
    pairs: Iterable[tuple[int, int]], store: _Store, vocab: Vocabulary, rng: random.Random
) -> None:
    """Reprice each (confuser position, target position) pair from the target's budget and rewrite the confuser's
    own budget and instruction for its new gold price (same budget kind)."""
    for position, target in pairs:
        target_draft, target_req, _ = store.get(target)
        draft, req, _ = store.get(position)
        reprice(draft, budget_level(target_draft, target_req, rng), rng)
        budget = make_budget(
            rng, vocab.budgets, draft.gold_price, draft.leaf.unit, kind=req.budget.kind,
            price_range=draft.leaf.price_range,
        )
        req = dataclasses.replace(req, budget=budget)
        store.put(position, (draft, req, full_instruction(draft, req, vocab, rng)))
