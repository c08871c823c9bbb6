"""Generator v6 cross-leaf confusers (issue 15 item 3): wrong type when bought, no task broken, deterministic."""

from __future__ import annotations

from typing import Any

import pytest

from shopsimrl.budget import resolve_price_upper
from shopsimrl.catalog.options import display_option_value
from shopsimrl.env._reward import category_parts, score_purchase
from shopsimrl.generate import DEFAULT_SEED, GeneratedCatalog, GeneratorConfig, build_catalog
from shopsimrl.generate import generator as generator_module
from shopsimrl.generate.confusers import confuser_table, partner_pairs
from shopsimrl.generate.vocabulary import load_vocabulary

ALL_LEAVES = GeneratorConfig(products=12000, two_axis_products=300, persona_tasks=2400)
"""Enough products for every leaf (60 each), so every pair of the table is present."""


@pytest.fixture(scope="module")
def catalog() -> GeneratedCatalog:
    return build_catalog(DEFAULT_SEED, ALL_LEAVES)


def _goal(record: dict[str, Any]) -> dict[str, Any]:
    item = record["instructions"][0]
    return {
        "category": record["category"],
        "name": record["title"],
        "attributes": item["attributes"],
        "goal_options": item["instruction_options"],
        "price_upper": resolve_price_upper(None, item["instruction_simple"], item["instruction"]),
    }


def test_table_pairs_are_neighbouring_leaves_of_one_domain() -> None:
    leaves = list(load_vocabulary().leaves)
    pairs = partner_pairs(leaves)
    assert len(pairs) == len(confuser_table()["pairs"]) >= 60
    for target, sources in pairs:
        for source, kind in sources:
            assert kind in confuser_table()["title"]
            assert leaves[source].domain == leaves[target].domain
            assert leaves[source].sub != leaves[target].sub


def test_every_confuser_gives_r_type_below_one_for_its_target(catalog: GeneratedCatalog) -> None:
    records = catalog.records
    assert len(catalog.confusers) >= 800
    for confuser in catalog.confusers:
        product, target = records[confuser.position], records[confuser.target]
        assert len(category_parts(product["category"]) & category_parts(target["category"])) == 1
        detail = score_purchase(product, _goal(target), {})
        assert detail["r_type"] < 1.0, (product["title"], target["title"], detail)
        assert detail["r_type"] == confuser.r_type
        assert target["title"] != product["title"]
        noun = catalog.leaves[[leaf.name for leaf in catalog.leaves].index(target["product_category"])].noun
        # it advertises the target's product type (title or compatibility line), so search brings it up
        assert noun in product["title"] or noun in product["small_description"][0]


def test_confusers_and_targets_are_disjoint_and_unique(catalog: GeneratedCatalog) -> None:
    sources = [c.position for c in catalog.confusers]
    targets = [c.target for c in catalog.confusers]
    assert len(set(sources)) == len(sources) and len(set(targets)) == len(targets)
    assert not set(sources) & set(targets)
    two_axis = {a.position for a in catalog.audits if a.two_axis}
    assert not (set(sources) | set(targets)) & two_axis


def test_confusers_prefer_persona_tasks(catalog: GeneratedCatalog) -> None:
    persona = {a.position for a in catalog.audits if a.persona}
    share = sum(c.target in persona for c in catalog.confusers) / len(catalog.confusers)
    assert share > len(persona) / len(catalog.records)


def test_no_task_loses_its_gold_product(catalog: GeneratedCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """A confuser's own task still succeeds with its gold SKU, and every other product is exactly as without them."""
    audits = {a.position: a for a in catalog.audits}
    for confuser in catalog.confusers:
        record, audit = catalog.records[confuser.position], audits[confuser.position]
        selection = {axis: display_option_value(value) for axis, value in audit.gold_options.items()}
        detail = score_purchase(record, _goal(record), selection)
        assert detail["r_success"] == 1, (record["title"], detail)
    monkeypatch.setattr(generator_module, "add_confusers", lambda *args, **kwargs: [])
    plain = build_catalog(DEFAULT_SEED, ALL_LEAVES)
    changed = {c.position for c in catalog.confusers}
    genuine = 0
    keys = ("asin", "title", "category", "attribute", "customization_options", "pricing", "small_description")
    for position, (record, before) in enumerate(zip(catalog.records, plain.records, strict=True)):
        same = all(record[key] == before[key] for key in keys)
        if position in changed:
            assert not same
            assert record["category"] == before["category"]
            # v8.1: repriced around the target's budget: the same options, the same price order (``reprice``)
            assert _unpriced(record) == _unpriced(before)
            assert _price_order(record) == _price_order(before)
            assert set(record["instructions"][0]["attributes"]) <= set(record["attribute"])
        elif record["title"] != before["title"]:  # v7: a genuine listing with a seller phrase of its own
            assert all(word in record["title"] for word in before["title"].split())  # v8: the phrase may sit inside
            assert all(record[key] == before[key] for key in keys if key != "title")
            genuine += 1
        else:
            assert same, position
    assert genuine > 100


def _unpriced(record: dict) -> dict:
    return {axis: [{k: v for k, v in e.items() if k != "price"} for e in es]
            for axis, es in record["customization_options"].items()}


def _price_order(record: dict) -> list:
    prices = [e.get("price") for es in record["customization_options"].values() for e in es]
    known = sorted({p for p in prices if p is not None})
    return [None if p is None else known.index(p) for p in prices]


def test_confusers_are_deterministic(catalog: GeneratedCatalog) -> None:
    again = build_catalog(DEFAULT_SEED, ALL_LEAVES)
    assert again.confusers == catalog.confusers
    assert [again.records[c.position] for c in again.confusers] == [
        catalog.records[c.position] for c in catalog.confusers
    ]


def test_no_title_rule_marks_confusers_perfectly(catalog: GeneratedCatalog) -> None:
    """v7: the strong policy's v6 rule (a title opening with 适用X, X专用, 搭配X, X平替 …) no longer separates them:
    some confusers carry the phrase at the end or not at all, and some genuine listings carry one (v6: the rule
    flagged every confuser and almost nothing else)."""
    from shopsimrl.agent.policies.strong_rule import is_accessory_listing

    sources = {c.position for c in catalog.confusers}
    flagged = sum(is_accessory_listing(catalog.records[p]["title"]) for p in sources) / len(sources)
    assert 0.3 <= flagged <= 0.8
    others = [r["title"] for i, r in enumerate(catalog.records) if i not in sources]
    assert sum(map(is_accessory_listing, others)) >= 100
    by_leaf: dict[str, list[bool]] = {}
    for record in catalog.records:
        by_leaf.setdefault(record["product_category"], []).append(is_accessory_listing(record["title"]))
    assert not any(all(marks) for marks in by_leaf.values())
    assert not is_accessory_listing("沃星热卖耐用卷尺自锁耐摔钢卷尺木工省力 L2984Pro")
