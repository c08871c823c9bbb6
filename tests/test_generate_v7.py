"""Generator v7: decidable persona tasks, user-owned price fields and tags, chance budgets, held-out phrasing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from shopsimrl.budget import resolve_price_upper
from shopsimrl.generate import DEFAULT_SEED, GeneratedCatalog, GeneratorConfig, build_catalog, write_catalog
from shopsimrl.generate.decidable import plain_of, task_problems
from shopsimrl.generate.persona_rules import rule_violations
from shopsimrl.generate.phrasing import held_out_form, split_forms
from shopsimrl.generate.products import no_repeats
from shopsimrl.generate.realism import v7_figures
from shopsimrl.generate.tells import price_field_figures
from shopsimrl.generate.vocabulary import load_vocabulary

MEDIUM = GeneratorConfig(products=3000, two_axis_products=90, persona_tasks=600)


@pytest.fixture(scope="module")
def medium() -> GeneratedCatalog:
    return build_catalog(DEFAULT_SEED, MEDIUM)


def _persona(catalog: GeneratedCatalog) -> list[tuple[dict, object]]:
    return [(r, a) for r, a in zip(catalog.records, catalog.audits, strict=True) if a.persona]


def _problems(record: dict, persona: dict | None = None, simple: str | None = None) -> list[str]:
    vocab = load_vocabulary()
    leaf = next(leaf for leaf in vocab.leaves if leaf.name == record["product_category"])
    item = record["instructions"][0]
    ceiling = resolve_price_upper(None, item["instruction_simple"], item["instruction"])
    return task_problems(
        item["instruction_simple"] if simple is None else simple, persona or record["user_persona"], record,
        item["attributes"], item["instruction_options"], ceiling, leaf, vocab,
    )


def test_every_persona_task_is_decidable_from_public_information(medium: GeneratedCatalog) -> None:
    persona = _persona(medium)
    undecidable = [a for _, a in persona if a.problems]
    assert len(undecidable) / len(persona) <= 0.01, [a.problems for a in undecidable[:5]]
    # the audit is what the check says on the written record (no private state in between)
    for record, audit in persona[:200]:
        assert _problems(record) == list(audit.problems)


def test_the_check_fails_a_competing_option_value_a_hidden_budget_and_a_missing_attribute(
    medium: GeneratedCatalog,
) -> None:
    """The v6.1 failure modes, rebuilt on v7 tasks: each must be reported."""
    competing = hidden = missing = 0
    for record, audit in _persona(medium):
        if audit.problems:
            continue
        item = record["instructions"][0]
        options = record["customization_options"]
        for value in item["instruction_options"]:
            axis = next(name for name, entries in options.items() if any(e["value"] == value for e in entries))
            vocab_axis = [v for leaf in load_vocabulary().leaves if leaf.name == record["product_category"]
                          for a in leaf.axes if a.name == axis for v in a.values]
            offered = {plain_of(e["value"], vocab_axis) for e in options[axis]}
            others = sorted(offered - {plain_of(value, vocab_axis)})
            if others:
                persona = copy.deepcopy(record["user_persona"])
                persona["行为特征"]["最近14天搜索关键词"].append(f"{others[0]}{record['product_category']}")
                assert any(p.startswith("option") for p in _problems(record, persona)), value
                competing += 1
                break
        if audit.ceiling is not None and audit.budget_phrase in item["instruction_simple"]:
            persona = copy.deepcopy(record["user_persona"])
            persona["行为特征"]["最近14天搜索关键词"] = [
                s for s in persona["行为特征"]["最近14天搜索关键词"] if audit.budget_phrase not in s
            ]
            simple = item["instruction_simple"].replace(audit.budget_phrase, "")
            assert any(p.startswith("budget") for p in _problems(record, persona, simple))
            hidden += 1
        if item["attributes"]:
            bare = {k: v for k, v in record["user_persona"].items() if k not in ("兴趣偏好", "行为特征")}
            bare["兴趣偏好"], bare["行为特征"] = {}, {}
            if any("attribute" in p for p in _problems(record, bare, simple="想买个东西")):
                missing += 1
    assert competing > 20 and hidden > 100 and missing > 100


def test_user_fields_are_the_users_not_the_golds(medium: GeneratedCatalog) -> None:
    figures = v7_figures(medium.records, medium.audits)
    assert figures["user_fields_fixed_share"] == 1.0  # v6.1: tags and 平均客单价 changed from task to task
    # v8: 平均客单价 and 价格区间 follow the stated ceiling (v7.1 drew them at random, so they contradicted the
    # request); given the ceiling they say nothing about the gold (v6.1 followed the gold price itself: 0.947)
    fields = price_field_figures(medium.records, medium.audits)
    assert abs(fields["avg_gold_partial_corr"]) < 0.15
    assert abs(fields["range_gold_partial_corr"]) < 0.15
    assert fields["field_probe_gain"] <= 2.0
    for record, _ in _persona(medium):
        fields = record["user_persona"]
        assert rule_violations(fields["人口属性"], fields["用户标签"]) == []


def test_tag_rules_catch_v61_breaks() -> None:
    assert rule_violations({"年龄段": "45-54", "性别": "男", "职业": "上班族"}, ["学生党"])
    assert rule_violations({"年龄段": "35-44", "性别": "女", "职业": "销售"}, ["教师"])
    assert rule_violations({"年龄段": "55+", "性别": "女", "职业": "退休人员"}, ["宝妈"])
    assert not rule_violations({"年龄段": "25-34", "性别": "女", "职业": "教师"}, ["教师", "宝妈"])


def test_budgets_place_the_gold_near_chance_among_fitting_listings(medium: GeneratedCatalog) -> None:
    figures = v7_figures(medium.records, medium.audits)
    # v6.1: the gold was the dearest fitting listing of its leaf in 28.6% of tasks (chance ~8.5%); v8 (ceilings near
    # the gold price, issue 41): at most 5 points above chance
    assert figures["gold_dearest_in_budget_share"] - figures["gold_dearest_chance"] <= 0.05
    assert 0.35 <= figures["gold_budget_rank"] <= 0.85


def test_held_out_users_draw_phrasing_no_train_persona_uses(medium: GeneratedCatalog) -> None:
    persona = _persona(medium)
    train = {form for _, a in persona if not a.held_out for form in a.forms}
    held = [a for _, a in persona if a.held_out]
    assert held
    for audit in held:
        for form in audit.forms:
            if held_out_form(form):
                assert form not in train
    assert all(not held_out_form(form) or not split_forms([form, "x"])[1] for form in train)
    assert v7_figures(medium.records, medium.audits)["held_out_unseen_form_share"] > 0.9


def test_predicted_held_out_users_are_the_prepared_val_and_test_users(tmp_path: Path) -> None:
    from shopsimrl.catalog.prepare import prepare_dataset

    config = GeneratorConfig(products=1500, two_axis_products=45, persona_tasks=400)
    catalog = build_catalog(3, config)
    archive = tmp_path / "generated.json.gz"
    write_catalog(archive, 3, config)
    prepare_dataset(archive, tmp_path / "prepared")
    splits = json.loads((tmp_path / "prepared" / "persona_splits.json").read_text("utf-8"))["splits"]
    goals_path = tmp_path / "prepared" / "budgets.json"
    asin_of = {row["task_id"]: row["asin"] for row in json.loads(goals_path.read_text("utf-8"))}
    held_asins = {asin_of[t] for name in ("test", "val") for t in splits[name]["task_ids"]}
    predicted = {a.asin for a in catalog.audits if a.persona and a.held_out}
    assert predicted and predicted == held_asins


def test_sizes_mostly_one_price_and_numbered_options_priced_in_order(medium: GeneratedCatalog) -> None:
    figures = v7_figures(medium.records, medium.audits)
    assert figures["size_axis_priced_share"] <= 0.2  # v6.1: 94% of shoe-size products
    assert figures["numbered_axis_misordered_share"] <= 0.05


def test_titles_never_repeat_a_word() -> None:
    assert no_repeats("新款新款运动鞋") == "新款运动鞋"
    assert no_repeats("军训军训鞋") == "军训鞋"
    assert no_repeats("跑步鞋") == "跑步鞋"
