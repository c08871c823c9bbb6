"""Why episodes failed: one primary cause per failed episode, plus behaviour flags on every purchase.

Primary cause, read from the trace and its reward detail, first match wins:

- never purchased: ``action_limit`` (turns ran out), ``generation_length`` (the model's output was cut off, or the
  next request would not fit the context budget),
  ``technical`` (the episode failed with an error: endpoint, protocol, environment);
- a purchase that scored below success: ``wrong_type`` (r_type < 1), ``missing_attribute`` (r_att < 1),
  ``wrong_option`` (r_option < 1), then on the price: ``price_unverifiable`` (no single price could be resolved
  for the selection) or ``over_budget`` (a resolved price above the ceiling).

Behaviour flags, in the spirit of ShopSimulator's BuyNow error analysis, on purchases (failed or not):

- ``first_page_bought``: the product bought was the only product page opened (no other listing compared);
- ``price_above_budget_shown``: the price displayed when buying (the selected variant's price, else the whole
  listed range) reached above the budget ceiling;
- ``unasked_slot_bought`` (dialogue mode): bought while the shopper had not yet revealed a slot the goal scores;
- ``bought_after_rejection`` (dialogue mode): bought after the shopper replied that the information was not
  complete (ShopSimulator's "purchased after the user rejected").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..contract import ACTION_LIMIT, GENERATION_LENGTH, PRODUCT_DETAIL, PURCHASE
from .dialogue_metrics import episode_dialogue

CAUSES = (ACTION_LIMIT, GENERATION_LENGTH, "technical", "wrong_type", "missing_attribute", "wrong_option",
          "over_budget", "price_unverifiable", "other")
CAUSE_TITLES = {
    ACTION_LIMIT: "never purchased: action limit", GENERATION_LENGTH: "never purchased: generation length",
    "technical": "never purchased: technical", "wrong_type": "wrong product type",
    "missing_attribute": "missing attribute", "wrong_option": "wrong option", "over_budget": "over budget",
    "price_unverifiable": "price unverifiable", "other": "other",
}
FLAGS = ("first_page_bought", "price_above_budget_shown", "unasked_slot_bought", "bought_after_rejection")
FLAG_TITLES = {
    "first_page_bought": "bought the first product page opened (no other listing compared)",
    "price_above_budget_shown": "bought with a displayed price above the budget",
    "unasked_slot_bought": "bought before the shopper revealed every scored slot",
    "bought_after_rejection": "bought after the shopper said the information was not complete",
}
DIALOGUE_FLAGS = ("unasked_slot_bought", "bought_after_rejection")  # reported for dialogue runs only
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
TAXONOMY_SCHEMA = "shopsimrl-failure-taxonomy-v1"


def _detail(record: Mapping[str, Any]) -> Mapping[str, Any]:
    detail = (record.get("final") or {}).get("reward_detail")
    return detail if isinstance(detail, Mapping) else {}


def _below(detail: Mapping[str, Any], key: str) -> bool:
    value = detail.get(key)
    return isinstance(value, (int, float)) and value < 1.0


def primary_cause(record: Mapping[str, Any]) -> str | None:
    """The failed episode's primary cause (None for a success)."""
    if record.get("status") != "completed":
        return "technical"
    detail = _detail(record)
    if detail.get("r_success") == 1:
        return None
    reason = detail.get("termination_reason") or (record.get("final") or {}).get("termination_reason")
    if reason != PURCHASE:
        return GENERATION_LENGTH if reason == GENERATION_LENGTH else ACTION_LIMIT
    if _below(detail, "r_type"):
        return "wrong_type"
    if _below(detail, "r_att"):
        return "missing_attribute"
    if _below(detail, "r_option"):
        return "wrong_option"
    if _below(detail, "r_price"):
        return "over_budget" if detail.get("price_verifiable") else "price_unverifiable"
    return "other"


def _product_pages(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Observation states of product pages, in order."""
    out = []
    for step in record.get("steps") or []:
        state = (step.get("environment") or {}).get("observation_state")
        if isinstance(state, Mapping) and state.get("page_type") == PRODUCT_DETAIL:
            out.append(state)
    return out


def _shown_prices(state: Mapping[str, Any]) -> list[float]:
    if isinstance(state.get("selected_price"), (int, float)):
        return [float(state["selected_price"])]
    product = state.get("product")
    text = str(product.get("price") or "") if isinstance(product, Mapping) else ""
    return [float(n) for n in _NUMBER.findall(text)]


def behaviour_flags(record: Mapping[str, Any]) -> list[str]:
    """The behaviour flags of a completed episode that ended in a purchase (empty otherwise)."""
    final = record.get("final") or {}
    if record.get("status") != "completed" or final.get("termination_reason") != PURCHASE:
        return []
    flags = []
    pages = _product_pages(record)
    bought = str((final.get("purchase") or {}).get("asin") or "")
    opened = {str((p.get("product") or {}).get("asin")) for p in pages}
    if opened == {bought}:
        flags.append("first_page_bought")
    budget = (final.get("goal") or {}).get("price_upper")
    if pages and isinstance(budget, (int, float)):
        shown = _shown_prices(pages[-1])
        if shown and max(shown) > float(budget):
            flags.append("price_above_budget_shown")
    dialogue = final.get("dialogue")
    if isinstance(dialogue, Mapping) and int(dialogue.get("slots_revealed") or 0) < int(dialogue.get("slots_total")
                                                                                        or 0):
        flags.append("unasked_slot_bought")
    told = episode_dialogue(record)
    if told is not None and told["bought_after_incomplete"]:
        flags.append("bought_after_rejection")
    return flags


def failure_taxonomy(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Cause counts over failed episodes and flag counts over purchases (all, failed, successful)."""
    causes: Counter[str] = Counter()
    flagged: dict[str, Counter[str]] = {flag: Counter() for flag in FLAGS}
    episodes = purchases = dialogue = 0
    for record in records:
        episodes += 1
        dialogue += isinstance(record.get("dialogue"), Mapping)
        cause = primary_cause(record)
        if cause is not None:
            causes[cause] += 1
        if (record.get("final") or {}).get("termination_reason") == PURCHASE and record.get("status") == "completed":
            purchases += 1
        for flag in behaviour_flags(record):
            flagged[flag]["purchases"] += 1
            flagged[flag]["failed" if cause else "succeeded"] += 1
    failures = sum(causes.values())
    shown = FLAGS if dialogue else tuple(f for f in FLAGS if f not in DIALOGUE_FLAGS)
    return {
        "schema_version": TAXONOMY_SCHEMA, "episodes": episodes, "failures": failures, "purchases": purchases,
        "causes": {c: causes[c] for c in CAUSES if causes[c]},
        "cause_shares": {c: causes[c] / failures for c in CAUSES if causes[c]},
        "flags": {flag: {"purchases": flagged[flag]["purchases"], "failed": flagged[flag]["failed"],
                         "succeeded": flagged[flag]["succeeded"],
                         "share_of_purchases": flagged[flag]["purchases"] / purchases if purchases else None}
                  for flag in shown},
    }


def cause_changes(pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> dict[str, Any]:
    """Between two runs' records of the same episodes: cause counts in each, and the most common moves."""
    a_causes: Counter[str] = Counter()
    b_causes: Counter[str] = Counter()
    moves: Counter[tuple[str, str]] = Counter()
    for record_a, record_b in pairs:
        cause_a = primary_cause(record_a) or "success"
        cause_b = primary_cause(record_b) or "success"
        a_causes[cause_a] += 1
        b_causes[cause_b] += 1
        if cause_a != cause_b:
            moves[(cause_a, cause_b)] += 1
    order = [c for c in (*CAUSES, "success") if a_causes[c] or b_causes[c]]
    return {
        "causes": {c: {"a": a_causes[c], "b": b_causes[c], "diff": b_causes[c] - a_causes[c]} for c in order},
        "changed": sum(moves.values()),
        "moves": [{"a": a, "b": b, "episodes": n}
                  for (a, b), n in sorted(moves.items(), key=lambda item: (-item[1], item[0]))],
    }
