"""Generator v8 (issue 41): the text validator, budgets near the gold price, persona price fields from the same
budget level, no option-order prior, cues at base rate. Figures over the whole default catalog are in
``tests/test_generate.py`` (its ``full`` fixture); these run on the module's medium catalog and on hand-made text."""

from __future__ import annotations

import math
import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopsimrl.budget import parse_budget
from shopsimrl.generate import DEFAULT_SEED, GeneratedCatalog, GeneratorConfig, build_catalog, text_check
from shopsimrl.generate.budgets import make_budget
from shopsimrl.generate.confusers import with_phrase
from shopsimrl.generate.persona_rules import rule_violations
from shopsimrl.generate.products import no_repeats
from shopsimrl.generate.tells import budget_figures, cue_figures, option_figures, price_field_figures
from shopsimrl.generate.vocabulary import load_vocabulary

MEDIUM = GeneratorConfig(products=3000, two_axis_products=90, persona_tasks=600)


@pytest.fixture(scope="module")
def medium() -> GeneratedCatalog:
    return build_catalog(DEFAULT_SEED, MEDIUM)


def _persona(searches: list[str], prefs: dict | None = None) -> dict:
    return {"兴趣偏好": {"商品属性偏好": prefs or {}}, "行为特征": {"最近14天搜索关键词": searches}}


@pytest.mark.parametrize(
    "searches, prefs, kind",
    [
        (["想买个选主机配滤芯的那套的宠物饮水机"], None, "doubles"),
        (["电水壶 家用用"], None, "doubles"),
        (["保温杯十大品牌排行榜 自己"], None, "ends on"),
        (["最近看吹风枪 价格不超过240元"], None, "budget"),
        ([], {"套餐": ["选主机配滤芯的那套"]}, "sentence"),
    ],
)
def test_the_validator_rejects_each_broken_persona_form(searches: list[str], prefs: dict | None, kind: str) -> None:
    problems = text_check.persona_text_problems("帮我找一个保温杯", _persona(searches, prefs))
    assert problems and kind in problems[0]


def test_the_validator_passes_natural_persona_text() -> None:
    persona = _persona(
        ["翻毛皮的方向盘套有没有好用又耐用的", "碎肉机怎么选", "手帐用荧光笔 柔和", "拖把 加6块布"],
        {"套餐": ["带充电器和收纳包"], "功能": ["静音", "防滑"], "尺码": ["XL"]},
    )
    assert text_check.persona_text_problems("找一个温和、男女都能用的洗面奶，预算300元左右", persona) == []


def test_the_validator_rejects_repeated_title_phrases_and_titles_ending_in_another_product() -> None:
    assert text_check.repeated_phrase("帝拓防呛易清洗防胀气奶瓶防胀气奶瓶升级款") == "防胀气奶瓶"
    assert text_check.repeated_phrase("HN1666 润星批发简约计算器 财务专用 财务专用") == "财务专用"
    assert text_check.repeated_phrase("适用卧室 骏威大号四件套 床单被套 适用卧室") == "适用卧室"
    assert text_check.repeated_phrase("鹿乐 方向盘套 真皮吸汗 真皮方向盘套") is None  # keyword stuffing, as shops do
    title = "博威便携车载吸尘器 冰丝防滑汽车坐垫搭档 座垫"
    assert text_check.ends_in_other_product(title, ["车载吸尘器", "吸尘器"], ["汽车坐垫", "座垫"]) == "座垫"
    assert text_check.ends_in_other_product("恒德商用电磁炉 G-7552 配数据线", ["电磁炉"], ["数据线"]) == "数据线"
    assert text_check.ends_in_other_product("优雅 车衣 易安装加厚 防晒", ["车衣", "防晒"], ["防晒霜"]) is None


_CJK = st.text(alphabet=st.sampled_from("新款运动鞋防胀气奶瓶用装 "), min_size=0, max_size=30)


@given(_CJK)
def test_no_repeats_leaves_no_repeated_phrase(text: str) -> None:
    cleaned = no_repeats(" ".join(text.split()))
    assert text_check.repeated_phrase(cleaned) is None
    assert not re.search(r"(用|装|款)\1", cleaned)


@given(st.text(alphabet=st.sampled_from("保温杯 车载吸尘器KX-"), min_size=1, max_size=20), st.booleans())
def test_a_seller_phrase_never_ends_a_title(title: str, inside: bool) -> None:
    titled = with_phrase(title.strip() or "保温杯", "汽车坐垫搭档", inside)
    assert not titled.endswith("汽车坐垫搭档")


def test_the_medium_catalog_has_no_broken_text(medium: GeneratedCatalog) -> None:
    assert text_check.catalog_text_problems(medium.records) == []


def test_ceilings_sit_near_the_gold_price_and_bind() -> None:
    table = load_vocabulary().budgets
    rng = random.Random(7)
    ratios = []
    for _ in range(3000):
        gold = round(math.exp(rng.uniform(1.0, 8.0)), 1)
        budget = make_budget(rng, table, gold, "个", kind=rng.choice(("approximate_upper", "hard_upper")))
        assert budget.ceiling is not None and budget.ceiling >= gold
        assert parse_budget(budget.phrase) == budget.ceiling
        ratios.append(budget.ceiling / gold)
    ratios.sort()
    assert 1.05 <= ratios[len(ratios) // 2] <= 1.5  # v7.1: median 2.2, 28% at the 5x cap
    assert ratios[int(0.95 * len(ratios))] <= 3.0
    assert sum(4.8 <= r <= 5.2 for r in ratios) / len(ratios) < 0.01


def test_budgets_bind_without_a_price_tell(medium: GeneratedCatalog) -> None:
    figures = budget_figures(medium.records, medium.audits, medium.confusers)
    assert figures["binding_share"] >= 0.4  # v7.1: 0.47 with ceilings up to 5x; now the nearest listings matter
    assert figures["ceiling_ratio_spike_share"] < 0.01
    assert figures["approx_amount_2x_share"] < 0.1  # v7.1: 0.52
    assert figures["range_ratio_p50"] <= 1.4 and figures["range_over_2x_share"] < 0.05  # real: 1.17, 0.9%


def test_persona_price_fields_agree_with_the_request(medium: GeneratedCatalog) -> None:
    figures = price_field_figures(medium.records, medium.audits)
    assert figures["ceiling_over_range_max_share"] < 0.3  # v7.1: 0.544
    assert figures["ceiling_over_range_max_2x_share"] < 0.05  # v7.1: 0.356
    assert figures["ceiling_under_range_min_share"] < 0.05  # v7.1: 0.115
    assert figures["low_level_over_5x_avg_share"] < 0.1  # v7.1: 0.574
    assert figures["avg_outside_range_share"] < 0.45  # v7.1: 0.561


def test_gold_option_values_sit_at_either_end_by_chance(medium: GeneratedCatalog) -> None:
    figures = option_figures(medium.records, medium.audits)
    assert abs(figures["gold_cheapest_share"] - figures["gold_cheapest_chance"]) < 0.06  # v7.1: 0.617 vs 0.384
    assert abs(figures["gold_dearest_share"] - figures["gold_dearest_chance"]) < 0.06  # v7.1: 0.080 vs 0.384
    assert figures["end_unordered_share"] == 0.0  # v7.1: 0.127 (大一点 between 淡色款 and 亮色款)
    assert 0.3 <= figures["end_low_share"] <= 0.7  # v7.1: 0.90


def test_brands_and_preference_words_land_on_the_gold_at_the_base_rate(medium: GeneratedCatalog) -> None:
    figures = cue_figures(medium.records, medium.audits)
    assert abs(figures["brand_gold_share"] - figures["brand_rival_share"]) < 0.06  # v7.1: 0.518 vs 0.324
    assert abs(figures["pref_word_gold_share"] - figures["pref_word_random_share"]) < 0.08  # v7.1: 0 vs 0.447
    assert figures["work_tag_mother_student_share"] == 0.0 and figures["student_tag_non_student_share"] == 0.0


def test_v8_tag_rules() -> None:
    assert rule_violations({"年龄段": "25-34", "性别": "女", "职业": "全职妈妈"}, ["夜市经营者"])
    assert rule_violations({"年龄段": "25-34", "性别": "男", "职业": "工程师"}, ["学生党"])
    assert not rule_violations({"年龄段": "18-24", "性别": "男", "职业": "学生"}, ["学生党"])
    assert not rule_violations({"年龄段": "35-44", "性别": "男", "职业": "个体经营者"}, ["夜市经营者"])


def test_confusers_are_priced_around_their_targets_budget(medium: GeneratedCatalog) -> None:
    """v8.1 (issue 41 item 1): a confuser's lowest price sits under its target's ceiling like a gold's (v8: median
    0.49 of the ceiling, 31% over it), and its own task still admits its own gold SKU."""
    figures = budget_figures(medium.records, medium.audits, medium.confusers)
    assert 0.6 <= figures["confuser_to_ceiling_p50"] <= 0.9
    assert figures["confuser_over_ceiling_share"] < 0.02
    audit_of = {a.position: a for a in medium.audits}
    for confuser in medium.confusers:
        own = audit_of[confuser.position]
        assert own.ceiling is None or own.gold_price <= own.ceiling
        assert parse_budget(own.budget_phrase) == own.ceiling or own.ceiling is None


@pytest.mark.parametrize(
    "text, odd",
    [
        ("最近想入手送礼和压榨的食用油", True),
        ("看看一级又拿得出手送礼的食用油", True),
        ("想要便携、不分男女和防缠绕的", True),
        ("最近想入手压榨、适合送礼的食用油", False),
        ("想要牛油和重庆、老人小孩都适合的火锅底料", False),
    ],
)
def test_the_validator_rejects_a_purpose_joined_to_a_property(text: str, odd: bool) -> None:
    assert (text_check.odd_join(text) is not None) is odd


def test_attribute_lists_put_purposes_after_properties() -> None:
    """v8.1 (issue 41 item 4): 压榨、适合送礼 (or 送礼用), never 送礼和压榨."""
    from shopsimrl.generate.instructions import join_attributes

    vocab = load_vocabulary()
    rng = random.Random(5)
    for _ in range(200):
        text = join_attributes(("送礼", "压榨"), vocab, rng)
        assert text_check.odd_join(text + "的食用油") is None
        assert text.endswith(("送礼", "送礼用", "送人")), text


@pytest.mark.parametrize(
    "value, amount",
    [("1L", 1000.0), ("600ml", 600.0), ("2T【热卖】", 2048.0), ("500G", 500.0), ("1万毫安", 10000.0),
     ("5斤装 新米", 2500.0), ("3本装", 3.0), ("苹果14 升级版", None), ("44码", None), ("经典款", None)],
)
def test_unit_amount_reads_the_amount_with_its_unit(value: str, amount: float | None) -> None:
    from shopsimrl.generate.amounts import unit_amount

    assert unit_amount(value) == amount


def test_amount_axes_are_priced_by_their_amount(medium: GeneratedCatalog) -> None:
    """v8.1 (issue 41 item 6): no amount axis at one price (v8: 500G/2T/4T all 1,599), and a priced one rises."""
    from shopsimrl.generate.amounts import amounts_of, flat_amount_share

    assert flat_amount_share(medium.records) == 0.0
    for record in medium.records:
        for axis, entries in record["customization_options"].items():
            amounts = amounts_of(axis, [str(e["value"]) for e in entries])
            if amounts is None or entries[0].get("price") is None:
                continue
            prices = [p for _, p in sorted(zip(amounts, [e["price"] for e in entries], strict=True))]
            assert prices == sorted(prices) and len(set(prices)) == len(prices), (axis, entries)
