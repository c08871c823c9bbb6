"""v8 figures: do budgets bind, do persona price fields agree with the request, is there an option-order prior,
is there broken text, do the persona's brands and preference words point at the gold (issue 41).

Computed from a generated catalog (``build_catalog``: records, private audits, confusers) by
``benchmarks/bench_tells.py``, so generator v7.1 and v8 are measured by the same code; persona tasks only.

- ``ceiling_ratio_p50/p75/p95``: the stated ceiling over the gold SKU's price; ``ceiling_ratio_spike_share``: ratios
  in 4.8–5.2 (v7.1's cap); ``approx_amount_2x_share``: ``左右`` amounts at least twice the gold price.
- ``gold_sku_over_ceiling_share``: gold products with a SKU over the ceiling; ``priced_axis_all_fit_share``: gold
  products with a priced axis whose every value fits; ``rival_over_ceiling_share``: tasks where another listing of
  the leaf holding every required attribute costs more than the ceiling; ``binding_share``: either of the two.
- ``range_ratio_p50`` / ``range_over_2x_share``: high/low of range budgets (``750-3800元之间``).
- ``budget_shapes_span`` (tasks ``0..SPAN``, the real annotations' span) — real: 416.
- ``confuser_to_ceiling_p50``: a confuser's lowest price over its target's ceiling; ``confuser_over_ceiling_share``:
  confusers whose lowest price is over it (the budget alone rules them out; v8.1 reprices them, ``reprice``).
- ``ceiling_over_range_max_share`` / ``..._2x_share`` / ``ceiling_under_range_min_share``: against 价格区间;
  ``low_level_over_5x_avg_share``: 消费等级=低 users whose ceiling is over 5× their 平均客单价;
  ``avg_outside_range_share``: 平均客单价 outside 价格区间; ``range_holds_gold_share`` / ``range_holds_rival_share``:
  价格区间 holds the gold / an in-budget rival of its leaf (a price tell when they differ).
- ``gold_cheapest_share`` / ``_chance``, ``gold_dearest_share`` / ``_chance``: gold values on axes whose price varies;
  ``bundle3_full_share``: 3-value bundle axes whose gold is the largest set (chance 1/3).
- ``end_low_share``: described end values (``最小的那档``) that point to the cheap end; ``end_unordered_share``:
  those on an unordered axis (淡色款 / 亮色款).
- ``brand_gold_share`` / ``brand_rival_share``: the gold's brand / a rival brand of the leaf in the persona's brand
  preferences, viewed or saved listings; ``pref_word_gold_share`` / ``pref_word_random_share``: a persona
  preference word that is no goal attribute held by the gold / by a random listing of its leaf.
- ``size_field_empty_share``; ``work_tag_mother_student_share``: business tags on 全职妈妈 / 学生 users;
  ``student_tag_non_student_share``: 学生党 on users who are not students.
- ``text_problem_share``: persona tasks with a broken form (``text_check``).
- ``flat_quantity_share``: priced axes whose values carry rising numbers, at one price; v8.1 ``flat_amount_share``:
  amount axes read with their units (``amounts.unit_amount``: 1L, 2T, 1万毫安), sizes left out, whose values all give
  one price (one listed price or none), over the whole archive.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .amounts import flat_amount_share
from .bundles import is_bundle_axis, parts_of
from .persona_rules import BUSINESS_TAGS
from .realism import budget_shape
from .text_check import catalog_text_problems, persona_text_problems

SPAN = 2470
END_LOW = ("最小", "最便宜", "最低", "小一点", "小的", "便宜点", "便宜的")
END_HIGH = ("最大", "最高", "最贵", "大一点", "大的", "贵一点", "贵点")


def _q(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _share(hits: int, count: int) -> float:
    return hits / max(1, count)


def budget_figures(records: Sequence[Mapping[str, Any]], audits: Sequence[Any], confusers: Sequence[Any]) -> dict[str, float]:
    """Item 1: how the stated ceiling relates to the gold price and to the other listings of the leaf."""
    by_leaf: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        by_leaf.setdefault(str(record["product_category"]), []).append(i)
    ratios: list[float] = []
    approx = approx_2x = sku_over = priced = all_fit = rival_over = binding = 0
    bounded = 0
    for i, (record, audit) in enumerate(zip(records, audits, strict=True)):
        if not audit.persona or audit.ceiling is None:
            continue
        bounded += 1
        ratios.append(audit.ceiling / audit.gold_price)
        if audit.budget_kind == "approximate_upper":
            approx += 1
            approx_2x += audit.ceiling / 1.1 >= 2 * audit.gold_price
        prices = [e["price"] for es in record["customization_options"].values() for e in es if e.get("price") is not None]
        over = any(p > audit.ceiling for p in prices)
        sku_over += over
        if len(set(prices)) > 1:
            priced += 1
            all_fit += not over
        wanted = set(record["instructions"][0]["attributes"])
        rival = any(
            j != i and wanted <= set(records[j]["attribute"]) and min(records[j]["pricing"]) > audit.ceiling
            for j in by_leaf[str(record["product_category"])]
        )
        rival_over += rival
        binding += rival or over
    ranges = [h / lo for h, lo in (_range_of(a.budget_phrase) for a in audits if a.persona) if lo]
    shapes = {budget_shape(a.budget_phrase) for a in audits if a.position <= SPAN and a.budget_phrase}
    ceiling_of = {a.position: a.ceiling for a in audits}
    position_index = {a.position: i for i, a in enumerate(audits)}
    conf = [
        min(records[position_index[c.position]]["pricing"]) / ceiling_of[c.target]
        for c in confusers if ceiling_of.get(c.target)
    ]
    return {
        "ceiling_ratio_p50": _q(ratios, 0.5), "ceiling_ratio_p75": _q(ratios, 0.75), "ceiling_ratio_p95": _q(ratios, 0.95),
        "ceiling_ratio_spike_share": _share(sum(4.8 <= r <= 5.2 for r in ratios), len(ratios)),
        "approx_amount_2x_share": _share(approx_2x, approx),
        "gold_sku_over_ceiling_share": _share(sku_over, bounded),
        "priced_axis_all_fit_share": _share(all_fit, priced),
        "rival_over_ceiling_share": _share(rival_over, bounded),
        "binding_share": _share(binding, bounded),
        "range_ratio_p50": _q(ranges, 0.5), "range_over_2x_share": _share(sum(r > 2 for r in ranges), len(ranges)),
        "budget_shapes_span": float(len(shapes)),
        "confuser_to_ceiling_p50": _q(conf, 0.5),
        "confuser_over_ceiling_share": _share(sum(r > 1 for r in conf), len(conf)),
    }


def _range_of(phrase: str) -> tuple[float, float]:
    """(high, low) of a range budget phrase (two Arabic amounts, the first lower), else (0, 0)."""
    import re

    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", phrase or "")]
    if len(numbers) == 2 and 0 < numbers[0] < numbers[1]:
        return numbers[1], numbers[0]
    return 0.0, 0.0


def real_range_figures(annotations: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The same range figures over the real annotation evidence strings."""
    ranges = [h / lo for h, lo in (_range_of(str(a.get("evidence") or "")) for a in annotations) if lo]
    return {"range_ratio_p50": _q(ranges, 0.5), "range_over_2x_share": _share(sum(r > 2 for r in ranges), len(ranges))}


def price_field_figures(records: Sequence[Mapping[str, Any]], audits: Sequence[Any]) -> dict[str, float]:
    """Item 2: the persona's 价格区间, 平均客单价 and 消费等级 against the stated ceiling and the gold."""
    by_leaf: dict[str, list[float]] = {}
    for record in records:
        by_leaf.setdefault(str(record["product_category"]), []).append(min(record["pricing"]))
    above = above2 = below = bounded = low_users = low_over = outside = count = holds_gold = holds_rival = rivals = 0
    for record, audit in zip(records, audits, strict=True):
        persona = record.get("user_persona")
        if not audit.persona or not persona:
            continue
        count += 1
        span = persona.get("兴趣偏好", {}).get("商品属性偏好", {}).get("价格区间") or {}
        lo, hi = float(span.get("最小值", 0)), float(span.get("最大值", 0))
        spend = float(persona.get("交易特征", {}).get("平均客单价", 0))
        outside += not lo <= spend <= hi
        holds_gold += lo <= min(record["pricing"]) <= hi
        if audit.ceiling is None:
            continue
        bounded += 1
        above += audit.ceiling > hi
        above2 += audit.ceiling > 2 * hi
        below += audit.ceiling < lo
        if persona.get("人口属性", {}).get("消费等级") == "低":
            low_users += 1
            low_over += audit.ceiling > 5 * spend
        fitting = [p for p in by_leaf[str(record["product_category"])] if p <= audit.ceiling and p != min(record["pricing"])]
        rivals += len(fitting)
        holds_rival += sum(lo <= p <= hi for p in fitting)
    return {
        **_field_gain(records, audits),
        "ceiling_over_range_max_share": _share(above, bounded),
        "ceiling_over_range_max_2x_share": _share(above2, bounded),
        "ceiling_under_range_min_share": _share(below, bounded),
        "low_level_over_5x_avg_share": _share(low_over, low_users),
        "avg_outside_range_share": _share(outside, count),
        "range_holds_gold_share": _share(holds_gold, count),
        "range_holds_rival_share": _share(holds_rival, rivals),
    }


def _correlation(xs: list[float], ys: list[float]) -> float:
    try:
        return statistics.correlation(xs, ys) if len(xs) >= 3 else float("nan")
    except statistics.StatisticsError:
        return float("nan")


def _nearest(records: Sequence[Mapping[str, Any]], candidates: list[int], ceiling: float, ratio: float) -> int:
    """The candidate whose lowest price over ``ceiling`` is nearest ``ratio`` (ties: the first position)."""
    return min(candidates, key=lambda j: (abs(min(records[j]["pricing"]) / ceiling - ratio), j))


def _field_gain(records: Sequence[Mapping[str, Any]], audits: Sequence[Any]) -> dict[str, float]:
    """Do the price fields tell more about the gold than the stated ceiling does?

    ``avg_gold_partial_corr`` / ``range_gold_partial_corr``: log(平均客单价 / ceiling) and log(价格区间 max / ceiling)
    against log(gold / ceiling) (0: nothing beyond the ceiling). ``ceiling_probe_hit`` / ``field_probe_hit``: a
    probe picks, among the leaf's listings that fit the ceiling and hold every required attribute, the one whose
    price over the ceiling is nearest the median gold's; the field probe first keeps those inside 价格区间 (when
    any); ``field_probe_gain`` is the difference in points of tasks where the pick is the gold."""
    by_leaf: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        by_leaf.setdefault(str(record["product_category"]), []).append(i)
    rows = [(i, r, a) for i, (r, a) in enumerate(zip(records, audits, strict=True))
            if a.persona and r.get("user_persona") and a.ceiling]
    ratio = statistics.median(min(r["pricing"]) / a.ceiling for _, r, a in rows) if rows else 0.5
    gold_x: list[float] = []
    avg_y: list[float] = []
    hi_y: list[float] = []
    plain = fielded = 0
    for i, record, audit in rows:
        persona = record["user_persona"]
        span = persona.get("兴趣偏好", {}).get("商品属性偏好", {}).get("价格区间") or {}
        lo, hi = float(span.get("最小值", 0)), float(span.get("最大值", 0))
        spend = float(persona.get("交易特征", {}).get("平均客单价", 0) or 0)
        gold = min(record["pricing"])
        if spend > 0 and hi > 0:
            gold_x.append(math.log(gold / audit.ceiling))
            avg_y.append(math.log(spend / audit.ceiling))
            hi_y.append(math.log(hi / audit.ceiling))
        wanted = set(record["instructions"][0]["attributes"])
        pool = [j for j in by_leaf[str(record["product_category"])]
                if min(records[j]["pricing"]) <= audit.ceiling and wanted <= set(records[j]["attribute"])]
        if not pool:
            continue

        plain += _nearest(records, pool, audit.ceiling, ratio) == i
        inside = [j for j in pool if lo <= min(records[j]["pricing"]) <= hi]
        fielded += _nearest(records, inside or pool, audit.ceiling, ratio) == i
    return {
        "avg_gold_partial_corr": _correlation(gold_x, avg_y),
        "range_gold_partial_corr": _correlation(gold_x, hi_y),
        "ceiling_probe_hit": _share(plain, len(rows)),
        "field_probe_hit": _share(fielded, len(rows)),
        "field_probe_gain": 100 * (fielded - plain) / max(1, len(rows)),
    }


def option_figures(records: Sequence[Mapping[str, Any]], audits: Sequence[Any]) -> dict[str, float]:
    """Item 3: where the gold value sits on axes whose price varies, and what end descriptions point to."""
    from .vocabulary import load_vocabulary

    ordered_axes = {(leaf.name, a.name): a.ordered for leaf in load_vocabulary().leaves for a in leaf.axes}
    axes = cheapest = dearest = 0
    chance_low = chance_high = 0.0
    bundles = full = ends = low = unordered = 0
    for record, audit in zip(records, audits, strict=True):
        if not audit.persona:
            continue
        simple = record["instructions"][0].get("instruction_simple") or ""
        for axis, value in audit.gold_options.items():
            entries = record["customization_options"].get(axis, [])
            prices = [e.get("price") for e in entries]
            shown = [str(e["value"]) for e in entries]
            if is_bundle_axis(shown) and len(shown) == 3:
                bundles += 1
                full += len(parts_of(value)) == max(len(parts_of(v)) for v in shown)
            if any(p is None for p in prices) or len(set(prices)) < 2:
                continue
            gold = prices[shown.index(value)]
            axes += 1
            cheapest += gold == min(prices)
            dearest += gold == max(prices)
            chance_low += prices.count(min(prices)) / len(prices)
            chance_high += prices.count(max(prices)) / len(prices)
            described = _end_word(simple, axis)
            if described:
                ends += 1
                low += described == "low"
                is_ordered = ordered_axes.get((audit.leaf, axis), False) or is_bundle_axis(shown) or _rising(shown)
                unordered += not is_ordered
    return {
        "gold_cheapest_share": _share(cheapest, axes), "gold_cheapest_chance": chance_low / max(1, axes),
        "gold_dearest_share": _share(dearest, axes), "gold_dearest_chance": chance_high / max(1, axes),
        "bundle3_full_share": _share(full, bundles),
        "end_described": float(ends), "end_low_share": _share(low, ends), "end_unordered_share": _share(unordered, ends),
    }


def _rising(values: Sequence[str]) -> bool:
    from .option_prices import is_quantity

    return is_quantity(list(values))


def _end_word(simple: str, axis: str) -> str:
    """``low`` / ``high`` when the request describes an end of ``axis`` (``规格要最小的那档``), else ``""``."""
    for clause in simple.replace("。", "，").split("，"):
        if axis in clause and ("那档" in clause or "那个" in clause or "选" in clause):
            if any(w in clause for w in END_LOW):
                return "low"
            if any(w in clause for w in END_HIGH):
                return "high"
    return ""


def cue_figures(records: Sequence[Mapping[str, Any]], audits: Sequence[Any]) -> dict[str, float]:
    """Items 5 and 6: brands and preference words of the persona against the gold and its rivals; persona noise."""
    rng = random.Random("shopsimrl-tells")
    by_leaf: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        by_leaf.setdefault(str(record["product_category"]), []).append(i)
    brand_of = [str(r["shop_name"]) for r in records]
    count = gold_brand = rival_brand = gold_word = random_word = worded = 0
    sizes = empty_size = mothers = work_on_mothers = non_students = student_tag = text_bad = 0
    for i, (record, audit) in enumerate(zip(records, audits, strict=True)):
        persona = record.get("user_persona")
        if not audit.persona or not persona:
            continue
        count += 1
        named = " ".join([*persona["兴趣偏好"].get("品牌偏好", []), *persona["行为特征"].get("最近浏览商品", []),
                          *persona["行为特征"].get("收藏商品", [])])
        gold_brand += _brand_named(brand_of[i], named)
        rivals = [j for j in by_leaf[str(record["product_category"])] if brand_of[j] != brand_of[i]]
        if rivals:
            rival_brand += _brand_named(brand_of[rng.choice(rivals)], named)
        goal = set(record["instructions"][0]["attributes"])
        prefs = persona["兴趣偏好"].get("商品属性偏好", {})
        words = {str(v) for k, vs in prefs.items() if k != "价格区间" and isinstance(vs, list) for v in vs} - goal
        if words:
            worded += 1
            gold_word += bool(words & set(record["attribute"]))
            other = records[rng.choice(by_leaf[str(record["product_category"])])]
            random_word += bool(words & set(other["attribute"]))
        for field in ("尺码", "鞋码", "尺寸"):
            if field in prefs:
                sizes += 1
                empty_size += not prefs[field]
        job = persona["人口属性"].get("职业")
        tags = persona.get("用户标签", [])
        if job in ("全职妈妈", "学生"):
            mothers += 1
            work_on_mothers += any(t in BUSINESS_TAGS for t in tags)
        if job != "学生":
            non_students += 1
            student_tag += "学生党" in tags
        text_bad += bool(persona_text_problems(record["instructions"][0].get("instruction_simple") or "", persona))
    return {
        "brand_gold_share": _share(gold_brand, count), "brand_rival_share": _share(rival_brand, count),
        "pref_word_gold_share": _share(gold_word, worded), "pref_word_random_share": _share(random_word, worded),
        "size_field_empty_share": _share(empty_size, sizes),
        "work_tag_mother_student_share": _share(work_on_mothers, mothers),
        "student_tag_non_student_share": _share(student_tag, non_students),
        "text_problem_share": _share(text_bad, count),
    }


def flat_quantity_share(records: Sequence[Mapping[str, Any]]) -> float:
    """Item 6: priced quantity-like axes (values carrying rising amounts: 500G/2T/4T; sizes left out) with one price."""
    axes = flat = 0
    for record in records:
        for axis, entries in record["customization_options"].items():
            prices = [e.get("price") for e in entries]
            if axis in ("尺码", "鞋码", "参考身高") or any(p is None for p in prices) or len(entries) < 2:
                continue
            if _rising([str(e["value"]) for e in entries]):
                axes += 1
                flat += len(set(prices)) == 1
    return _share(flat, axes)


def _brand(shop: str) -> str:
    """The brand of a shop name (the shop is the brand plus a suffix: 旗舰店, 官方店 …)."""
    from .vocabulary import load_vocabulary

    for suffix in sorted(load_vocabulary().text["shop_suffixes"], key=len, reverse=True):
        if shop.endswith(suffix) and len(shop) > len(suffix):
            return shop[: -len(suffix)]
    return shop


def _brand_named(shop: str, text: str) -> bool:
    return _brand(shop) in text


def tells_figures(records: Sequence[Mapping[str, Any]], audits: Sequence[Any], confusers: Sequence[Any]) -> dict[str, float]:
    """Every figure above, plus the broken-form count of the whole catalog by kind."""
    problems = Counter(p.split(":")[0].split(" ")[0] + " " + p.split(":")[0].split(" ")[1] for p in catalog_text_problems(records))
    return {
        **budget_figures(records, audits, confusers),
        **price_field_figures(records, audits),
        **option_figures(records, audits),
        **cue_figures(records, audits),
        "flat_quantity_share": flat_quantity_share(records),
        "flat_amount_share": flat_amount_share(records),
        "text_problems": float(sum(problems.values())),
        **{f"text_problems[{kind}]": float(n) for kind, n in sorted(problems.items())},
    }
