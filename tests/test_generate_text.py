"""Generator v7.1 text: no contradictory attributes, no other kind's words, recent searches of the seed's length
that name the product, and budget shapes with a long tail (issue 26, item 6)."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest

from shopsimrl.budget import parse_budget
from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.generate import DEFAULT_SEED, GeneratedCatalog, GeneratorConfig, build_catalog
from shopsimrl.generate.budgets import APPROXIMATE_MULTIPLIER
from shopsimrl.generate.default import build_default_catalog
from shopsimrl.generate.realism import _names_two, realism_figures, text_figures
from shopsimrl.generate.vocabulary import load_vocabulary

MEDIUM = GeneratorConfig(products=3000, two_axis_products=90, persona_tasks=600)


@pytest.fixture(scope="module")
def medium() -> GeneratedCatalog:
    return build_catalog(DEFAULT_SEED, MEDIUM)


def test_no_product_names_two_values_of_an_exclusive_group(medium: GeneratedCatalog) -> None:
    """高帮 with 低帮, 小型犬 with 中大型犬, a 幼犬期 scene on 成犬 food: 6.1% of the v7 products, now none of
    their own (a confuser's line about its partner product may name the partner's attribute: ≤ 0.1%)."""
    figures = text_figures(medium.records)
    assert figures["contradictory_text_share"] <= 0.001
    leaves = {leaf.name: leaf for leaf in load_vocabulary().leaves}
    for record in medium.records:
        leaf = leaves[record["product_category"]]
        for slot in leaf.slots:
            assert sum(value in slot.values for value in record["attribute"]) <= 1, record["attribute"]


def test_the_measure_sees_a_contradiction() -> None:
    assert _names_two("低帮不磨脚 高帮", ("高帮", "低帮", "中帮"))
    assert not _names_two("食品级不锈钢", ("不锈钢", "食品级不锈钢"))
    record = {"product_category": "牵引绳", "title": "小型犬 中大型犬 猫咪 牵引绳", "attribute": [],
              "small_description": [], "full_description": "", "customization_options": {}}
    assert text_figures([record]) == {"contradictory_text_share": 1.0, "other_kind_share": 1.0}


def test_every_use_scene_excludes_the_siblings_of_each_attribute() -> None:
    """The whole vocabulary: for every leaf and attribute, no scene the product may mention names an exclusive
    sibling of it (成犬 → not 幼犬期)."""
    checked = 0
    for leaf in load_vocabulary().leaves:
        for slot in leaf.slots:
            for value in slot.values:
                uses = leaf.uses_for([value])
                assert uses
                siblings = [v for v in slot.values if v != value]
                if any(s in u for s in siblings for u in leaf.uses):
                    checked += 1
                    assert not any(s in u for s in siblings for u in uses) or uses == leaf.uses, (leaf.name, value)
    assert checked >= 2  # 狗粮 and 猫粮 have such scenes


def test_leaves_of_one_kind_never_carry_another_kinds_words(medium: GeneratedCatalog) -> None:
    vocab = load_vocabulary()
    kinds = {leaf.name: leaf.foreign for leaf in vocab.leaves if leaf.foreign}
    assert {"狗粮", "牵引绳", "猫粮", "猫砂"} <= set(kinds)
    assert "猫" in kinds["牵引绳"] and "狗" in kinds["猫砂"]
    for leaf in vocab.leaves:
        assert not any(f in word for f in leaf.foreign for word in leaf.words), leaf.name
    assert text_figures(medium.records)["other_kind_share"] == 0.0


def test_every_composed_budget_shape_reads_back_as_its_ceiling() -> None:
    """Every combination of parts the generator may draw, at three amounts, parses to the intended ceiling."""
    table = load_vocabulary().budgets["composed"]
    combos = 0
    for kind, multiplier in (("approximate_upper", APPROXIMATE_MULTIPLIER), ("hard_upper", 1.0)):
        for group in table[kind]:
            for head, link, tail in itertools.product(group["heads"], group["links"], group["tails"]):
                for amount in (60, 350, 1200):
                    phrase = f"{head}{link}{amount}元{tail}"
                    assert parse_budget(phrase) == round(amount * multiplier, 8), phrase
                combos += 1
    assert combos > 1000


def test_searches_are_of_the_seeds_length_and_budget_shapes_have_a_long_tail(medium: GeneratedCatalog) -> None:
    figures = realism_figures(medium.records, medium.audits)
    assert 11 <= figures["mean_recent_search_chars"] <= 14  # the seed's two searches: 11 and 14 characters
    assert figures["search_names_product_share"] >= 0.7
    assert figures["budget_shape_singletons"] >= 0.3 * figures["budget_shapes"]
    lengths = [len(s) for r in medium.records if r.get("user_persona")
               for s in r["user_persona"]["行为特征"]["最近14天搜索关键词"]]
    assert statistics.median(lengths) >= 10


def test_force_regenerates_a_current_archive(tmp_path: Path) -> None:
    """``data build-default --force`` writes the archive again: a generator changed without a version bump leaves
    a manifest that still says "current" (found while measuring v7.1)."""
    small = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
    options = PrepareOptions(test_size=20, val_size=20)
    stages: list[str] = []
    build_default_catalog(tmp_path, seed=7, config=small, options=options)
    build_default_catalog(tmp_path, seed=7, config=small, options=options, progress=stages.append)
    assert not any(s.startswith("generating") for s in stages)
    stages.clear()
    build_default_catalog(tmp_path, seed=7, config=small, options=options, regenerate=True, progress=stages.append)
    assert any(s.startswith("generating") for s in stages)
