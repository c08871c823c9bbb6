"""v7.1 bundle option axes: values listing a package's parts, described (not copied) by requests."""

from __future__ import annotations

import random

import pytest

from shopsimrl.budget import resolve_price_upper
from shopsimrl.env import option_reward
from shopsimrl.generate import DEFAULT_SEED, GeneratedCatalog, GeneratorConfig, build_catalog
from shopsimrl.generate.bundles import (
    bundle_axis_share,
    described_match,
    draw_bundle,
    is_bundle_axis,
    parts_of,
)
from shopsimrl.generate.decidable import public_evidence, task_problems
from shopsimrl.generate.vocabulary import load_vocabulary

SMALL = GeneratorConfig(products=2500, two_axis_products=60, persona_tasks=500)


@pytest.fixture(scope="module")
def small() -> GeneratedCatalog:
    return build_catalog(DEFAULT_SEED, SMALL)


def _bundle_axes(record: dict) -> dict[str, list[dict]]:
    options = record.get("customization_options") or {}
    return {axis: entries for axis, entries in options.items() if is_bundle_axis([e["value"] for e in entries])}


def test_described_match_names_one_value_and_rejects_ambiguous_or_missing_sets() -> None:
    values = ["单主机", "两件套主机＋充电器", "三件套主机＋充电器＋收纳包"]
    assert described_match("要带充电器和收纳包的那套", values) == ["三件套主机＋充电器＋收纳包"]
    assert described_match("要带充电器的那套", values) == ["两件套主机＋充电器"]
    assert described_match("只要主机不带配件的那套", values) == ["单主机"]
    assert described_match("要主机加收纳包的那套", values) == []  # no value holds 收纳包 without 充电器
    assert described_match("要带贴膜的那套", ["两件套主机＋充电器", "两件套主机＋收纳包"]) == []
    # two values with one part set: the description does not decide
    assert len(described_match("要带充电器的那套", ["两件套主机＋充电器", "两件套充电器＋主机"])) == 2
    assert parts_of("三件套小吃车＋关东煮＋油炸") == ("小吃车", "关东煮", "油炸")


def test_drawn_bundles_are_distinct_part_sets_whose_descriptions_name_them() -> None:
    vocab = load_vocabulary()
    rng = random.Random(7)
    drawn = [b for leaf in vocab.text["bundle_options"]["leaves"] for _ in range(10)
             if (b := draw_bundle(leaf, vocab.text, rng)) is not None]
    assert len(drawn) > 50
    for bundle in drawn:
        sets = [frozenset(parts_of(v)) for v in bundle.values]
        assert len(set(sets)) == len(sets)
        for value, spoken in zip(bundle.values, bundle.spoken, strict=True):
            assert value not in spoken
            assert described_match(spoken, bundle.values) == [value]
            others = [v for v in bundle.values if v != value]
            assert option_reward(others, [value])[0] == 0.0  # no other value passes the reward's fuzzy match


def test_catalog_bundle_axes_are_well_formed_and_priced_by_parts(small: GeneratedCatalog) -> None:
    seen = 0
    for record in small.records:
        for entries in _bundle_axes(record).values():
            seen += 1
            values = [e["value"] for e in entries]
            parts = [parts_of(v) for v in values]
            assert all(len(set(p)) == len(p) >= 1 for p in parts), values
            assert len({frozenset(p) for p in parts}) == len(parts), values
            prices = [e.get("price") for e in entries]
            assert all(isinstance(p, (int, float)) for p in prices), entries
            for i, a in enumerate(parts):
                for j, b in enumerate(parts):
                    if len(a) < len(b):
                        assert prices[i] < prices[j], entries
    assert seen >= 30
    assert 0.0 < bundle_axis_share(small.records) < 0.2


def test_persona_tasks_on_bundles_are_decided_by_the_described_parts(small: GeneratedCatalog) -> None:
    vocab = load_vocabulary()
    leaves = {leaf.name: leaf for leaf in vocab.leaves}
    described = 0
    for record, audit in zip(small.records, small.audits, strict=True):
        if not audit.persona or audit.problems:
            continue
        item = record["instructions"][0]
        for entries in _bundle_axes(record).values():
            values = [e["value"] for e in entries]
            wanted = [v for v in item["instruction_options"] if v in values]
            if not wanted:
                continue
            simple = item["instruction_simple"]
            assert wanted[0] not in simple  # described, never copied
            ceiling = resolve_price_upper(None, simple, item["instruction"])
            leaf = leaves[record["product_category"]]
            assert task_problems(simple, record["user_persona"], record, item["attributes"],
                                 item["instruction_options"], ceiling, leaf, vocab) == []
            text, _ = public_evidence(simple, record["user_persona"])
            if "那档" in simple or "那个" in simple:
                continue  # an end of the priced axis, described
            assert described_match(text, values) == wanted
            described += 1
            # a wrong described set is caught: drop the gold's extra parts from the text
            extras = [p for p in parts_of(wanted[0]) if not all(p in parts_of(v) for v in values)]
            if extras:
                stripped = simple
                for part in extras:
                    stripped = stripped.replace(part, "")
                problems = task_problems(stripped, {}, record, [], [wanted[0]], None, leaf, vocab)
                assert problems and "described parts" in problems[0]
    assert described >= 5
