"""Realism figures of a generated catalog: what a reviewer of real Taobao data would check first.

Each figure is a plain number computed from the generated records and their private audits, so the
benchmark (``benchmarks/bench_realism.py``), the tests and the README quote the same definitions:

- ``colour_axis_price_varying_share``: priced 颜色分类 axes whose entries carry more than one price
  (real listings: colour is mostly price-neutral).
- ``quantity_axis_flat_share`` / ``quantity_axis_monotone_share``: priced ordered axes (规格/容量/重量…)
  with a single price for every amount / with prices that never fall as the amount grows.
- ``quantity_price_exponent``: median of log(price ratio) / log(amount ratio) over priced quantity axes
  whose values carry numbers spanning at least 2× (real shops: roughly 0.7–0.9).
- ``mean_option_value_chars``: mean length of an option value string.
- ``bundle_axis_share``: option axes whose values list a package's parts (两件套主机＋充电器; v7.1, generate/bundles.py).
- ``budget_shapes``: distinct budget phrases once amounts are replaced by ``#``; ``budget_shape_singletons``:
  those written once (the long tail; real annotations: 262 of 416).
- ``request_skeletons``: distinct short requests once the amounts, noun and required values are masked.
- ``request_openings``: distinct first four characters of those masked requests (the opening frame).
- ``still_want_joiner_share``: short requests holding ``，还要`` (a joiner that cuts noun phrases apart; real requests: 8.5%).
- ``persona_incoherent_share``: personas breaking a demographic rule (male 全职妈妈, under-35 退休人员,
  45+ 学生; also a tag against the gender: male 宝妈).
- ``gold_brand_in_preference_share``: persona tasks whose 品牌偏好 names the gold product's brand.
- ``mean_recent_search_chars``: mean length of a persona's recent search keyword.
- ``option_copied_share``: goal option values (the exact SKU strings) of persona tasks that appear verbatim in
  the short request (seller strings such as ``5斤装【囤货装】`` are named by their plain word or described).
- ``attribute_option_conflict_share``: products offering an option value that contradicts one of their attributes
  (``option_conflicts`` in ``vocab/text.json``: 单录款 on a 前后双录 recorder).
- ``two_sentence_request_share``: short requests with a sentence break inside them (``……不太满意。想换……``).
- ``omitted_without_verbatim_evidence_share``: requirements left out of a short request whose value appears
  nowhere in the public persona (only a paraphrase or an implied situation points at it).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from .bundles import bundle_axis_share
from .persona_rules import rule_violations

SIZE_AXES = ("尺码", "鞋码", "参考身高")
QUANTITY_AXES = ("规格", "容量", "重量", "净含量", "数量", "包装规格", "尺寸", "长度", "功率")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_AMOUNT = re.compile(r"[0-9零一二两三四五六七八九十百千万wWkK.]+")


def amount_of(value: str) -> float | None:
    """The first number in an option value (``5斤装`` → 5.0), or None."""
    match = _NUMBER.search(value)
    return float(match.group()) if match else None


def _option_conflicts() -> dict[str, list[str]]:
    from .vocabulary import load_vocabulary

    table: dict[str, list[str]] = load_vocabulary().text["option_conflicts"]
    return {attribute: values for attribute, values in table.items() if not attribute.startswith("_")}


def budget_shape(phrase: str) -> str:
    return _AMOUNT.sub("#", phrase) if phrase else ""


def _mask(text: str, words: Iterable[str]) -> str:
    for word in sorted((w for w in words if w), key=len, reverse=True):
        text = text.replace(word, "X")
    return _AMOUNT.sub("#", text)


def _option_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """Option figures: priced colour axes, amount axes (flat, monotone, exponent), value length, conflicts."""
    colour_priced = colour_varying = 0
    quantity_priced = quantity_flat = quantity_monotone = 0
    exponents: list[float] = []
    value_lengths: list[int] = []
    conflicts = _option_conflicts()
    conflicting = 0
    for record in records:
        banned = {v for attribute in record["attribute"] for v in conflicts.get(attribute, ())}
        offered = {e["value"] for entries in record["customization_options"].values() for e in entries}
        conflicting += bool(banned & offered)
        for axis, entries in record["customization_options"].items():
            value_lengths.extend(len(entry["value"]) for entry in entries)
            prices = [entry.get("price") for entry in entries]
            if any(price is None for price in prices) or len(prices) < 2:
                continue
            if axis == "颜色分类":
                colour_priced += 1
                colour_varying += len(set(prices)) > 1
            amounts = [amount_of(entry["value"]) for entry in entries]
            if axis in SIZE_AXES:  # a size is no amount (real sizes are mostly one price)
                continue
            if axis in QUANTITY_AXES or all(a is not None for a in amounts):
                known = [a for a in amounts if a is not None]
                if len(known) != len(amounts):
                    continue
                quantity_priced += 1
                quantity_flat += len(set(prices)) == 1
                pairs = sorted(zip(known, prices, strict=True))
                quantity_monotone += all(b[1] >= a[1] for a, b in pairwise(pairs))
                (low_amount, low_price), (high_amount, high_price) = pairs[0], pairs[-1]
                if low_amount > 0 and high_amount >= 2 * low_amount and low_price > 0:
                    exponents.append(math.log(high_price / low_price) / math.log(high_amount / low_amount))
    return {
        "colour_axis_price_varying_share": colour_varying / max(1, colour_priced),
        "quantity_axis_flat_share": quantity_flat / max(1, quantity_priced),
        "quantity_axis_monotone_share": quantity_monotone / max(1, quantity_priced),
        "quantity_price_exponent": statistics.median(exponents) if exponents else float("nan"),
        "mean_option_value_chars": statistics.fmean(value_lengths) if value_lengths else 0.0,
        "attribute_option_conflict_share": conflicting / max(1, len(records)),
    }


def realism_figures(records: list[dict[str, Any]], audits: list[Any]) -> dict[str, float]:
    """All figures above for one generated catalog (``build_catalog`` output)."""
    option = _option_figures(records)
    persona_records = [r for r in records if r.get("user_persona")]
    incoherent = sum(
        bool(rule_violations(r["user_persona"].get("人口属性", {}), r["user_persona"].get("用户标签", [])))
        for r in persona_records
    )
    brand_hits = 0
    search_lengths: list[int] = []
    skeletons: set[str] = set()
    openings: set[str] = set()
    joiner = two_sentence = copied = options = 0
    for record in persona_records:
        persona = record["user_persona"]
        brand = record["shop_name"]
        brand_hits += any(b and brand.startswith(b) for b in persona.get("兴趣偏好", {}).get("品牌偏好", []))
        search_lengths.extend(len(s) for s in persona.get("行为特征", {}).get("最近14天搜索关键词", []))
        instruction = record["instructions"][0]
        simple = instruction.get("instruction_simple") or ""
        joiner += "，还要" in simple or ",还要" in simple
        two_sentence += "。" in simple.rstrip("。")
        options += len(instruction["instruction_options"])
        copied += sum(value in simple for value in instruction["instruction_options"])
        words = [*instruction["attributes"], *instruction["instruction_options"], record["product_category"]]
        skeletons.add(_mask(simple, words))
        openings.add(_mask(simple, words)[:4])
    omitted = hidden = 0
    for record, audit in zip(records, audits, strict=True):
        if audit.persona and record.get("user_persona"):
            public = {k: v for k, v in record["user_persona"].items() if k != "__reasoning__"}
            text = json.dumps(public, ensure_ascii=False)
            omitted += len(audit.omitted)
            hidden += sum(value not in text for value in audit.omitted)
    shape_counts = Counter(budget_shape(a.budget_phrase) for a in audits if not a.two_axis and a.budget_phrase)
    count = max(1, len(persona_records))
    v7 = v7_figures(records, audits)
    return {
        "colour_axis_price_varying_share": option["colour_axis_price_varying_share"],
        "quantity_axis_flat_share": option["quantity_axis_flat_share"],
        "quantity_axis_monotone_share": option["quantity_axis_monotone_share"],
        "quantity_price_exponent": option["quantity_price_exponent"],
        "mean_option_value_chars": option["mean_option_value_chars"],
        "bundle_axis_share": bundle_axis_share(records),
        "budget_shapes": float(len(shape_counts)),
        "budget_shape_singletons": float(sum(n == 1 for n in shape_counts.values())),
        "request_skeletons": float(len(skeletons)),
        "request_openings": float(len(openings)),
        "still_want_joiner_share": joiner / count,
        "two_sentence_request_share": two_sentence / count,
        "attribute_option_conflict_share": option["attribute_option_conflict_share"],
        "option_copied_share": copied / max(1, options),
        "persona_incoherent_share": incoherent / count,
        "gold_brand_in_preference_share": brand_hits / count,
        "mean_recent_search_chars": statistics.fmean(search_lengths) if search_lengths else 0.0,
        "omitted_without_verbatim_evidence_share": hidden / max(1, omitted),
        **v7,
        **text_figures(records),
    }


def _log_correlation(pairs: list[tuple[float, float]]) -> float:
    points = [(math.log(a), math.log(b)) for a, b in pairs if a > 0 and b > 0]
    if len(points) < 3:
        return float("nan")
    xs, ys = zip(*points, strict=True)
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return float("nan")


def _budget_tells(records: list[dict[str, Any]], persona: list[tuple[dict[str, Any], Any]]) -> dict[str, float]:
    """Tells of the gold price among its leaf's listings in budget, and the persona's spend and price range."""
    by_leaf: dict[str, list[float]] = {}
    for record in records:
        by_leaf.setdefault(record["product_category"], []).append(min(record["pricing"]))
    dearest = chance = rank_sum = 0.0
    bounded = 0
    gold_ratio: list[float] = []
    other_ratio: list[float] = []
    corr: list[tuple[float, float]] = []
    contains = 0
    for record, audit in persona:
        low = min(record["pricing"])
        fields = record["user_persona"]
        spend = fields.get("交易特征", {}).get("平均客单价")
        if isinstance(spend, (int, float)):
            corr.append((float(spend), audit.gold_price))
        price_range = fields.get("兴趣偏好", {}).get("商品属性偏好", {}).get("价格区间") or {}
        contains += price_range.get("最小值", 0) <= audit.gold_price <= price_range.get("最大值", 0)
        if audit.ceiling is None:
            continue
        fitting = [p for p in by_leaf[record["product_category"]] if p <= audit.ceiling]
        if not fitting:
            continue
        bounded += 1
        dearest += low >= max(fitting)
        chance += 1 / len(fitting)
        below = sum(p < low for p in fitting)
        rank_sum += below / max(1, len(fitting) - 1)
        gold_ratio.append(low / audit.ceiling)
        other_ratio.extend(p / audit.ceiling for p in fitting if p != low)
    return {
        "gold_dearest_in_budget_share": dearest / max(1, bounded),
        "gold_dearest_chance": chance / max(1, bounded),
        "gold_budget_rank": rank_sum / max(1, bounded),
        "gold_to_ceiling_median": statistics.median(gold_ratio) if gold_ratio else float("nan"),
        "others_to_ceiling_median": statistics.median(other_ratio) if other_ratio else float("nan"),
        "avg_order_gold_log_correlation": _log_correlation(corr),
        "price_range_contains_gold_share": contains / max(1, len(persona)),
    }


def _axis_price_shares(records: list[dict[str, Any]], audits: list[Any]) -> dict[str, float]:
    """Size axes with several prices, and priced numbered axes that do not get dearer with the number."""
    size_priced = size_axes = misordered = numbered = 0
    for record, audit in zip(records, audits, strict=True):
        if audit.two_axis:  # raw-only products that cleaning drops
            continue
        for axis, entries in record["customization_options"].items():
            prices = [entry.get("price") for entry in entries]
            if any(price is None for price in prices):
                continue
            if axis in SIZE_AXES:
                size_axes += 1
                size_priced += len(set(prices)) > 1
            amounts = [(amount_of(entry["value"]), entry["price"]) for entry in entries]
            known = sorted((a, p) for a, p in amounts if a is not None)
            if len(known) >= 2 and len({p for _, p in known}) > 1:
                numbered += 1
                misordered += any(b[1] < a[1] for a, b in pairwise(known))
    return {
        "size_axis_priced_share": size_priced / max(1, size_axes),
        "numbered_axis_misordered_share": misordered / max(1, numbered),
    }


def v7_figures(records: list[dict[str, Any]], audits: list[Any]) -> dict[str, float]:
    """v7 figures: decidability, tells of the gold price, held-out phrasing, user-level fields, option prices.

    - ``decidable_share``: persona tasks whose generation-time check (``generate.decidable``) found nothing.
    - ``gold_dearest_in_budget_share`` / ``gold_dearest_chance``: persona tasks with a ceiling whose gold listing
      (lowest price) is the dearest of its leaf's listings within the ceiling, and the mean of 1 / (listings in
      budget), what a random choice would give.
    - ``gold_budget_rank``: the gold's mean rank among those listings (0 cheapest, 1 dearest; chance 0.5).
    - ``gold_to_ceiling_median`` / ``others_to_ceiling_median``: the lowest price over the ceiling, gold / the rest.
    - ``avg_order_gold_log_correlation``: log 平均客单价 against log gold price (v6.1: 0.947).
    - ``price_range_contains_gold_share``: personas whose 价格区间 holds the gold price (v6.1: 100%).
    - ``user_fields_fixed_share``: multi-task users whose tags, demographics and 平均客单价 never change.
    - ``held_out_unseen_form_share``: val/test persona tasks (predicted) with at least one form never used by a
      train persona; ``held_out_form_unseen_share``: their form uses that no train persona makes.
    - ``size_axis_priced_share``: size axes (尺码/鞋码/参考身高) with more than one price.
    - ``numbered_axis_misordered_share``: priced axes whose numbered values do not get dearer with the number.
    - ``mean_preference_items``: mean length of a persona's attribute preference lists (功能, 材质 …; the seed: 2–4).
    - ``material_preference_share``: personas with a 材质 preference (v6.1: 2.3%).
    - ``search_names_product_share``: recent searches naming the product (noun or synonym) or its use.
    """
    persona = [(r, a) for r, a in zip(records, audits, strict=True) if a.persona and r.get("user_persona")]
    tells = _budget_tells(records, persona)
    axis = _axis_price_shares(records, audits)
    users: dict[str, set[str]] = {}
    for record, audit in persona:
        fields = record["user_persona"]
        key = json.dumps([fields.get("用户标签"), fields.get("人口属性"), fields.get("交易特征", {}).get("平均客单价")],
                         ensure_ascii=False, sort_keys=True)
        users.setdefault(str(audit.user_id), set()).add(key)
    multi = [keys for user, keys in users.items() if sum(1 for _, a in persona if str(a.user_id) == user) > 1]
    train_forms = {form for _, a in persona if not a.held_out for form in a.forms}
    held = [a for _, a in persona if a.held_out]
    form_uses = [form for a in held for form in a.forms]
    count = max(1, len(persona))
    lists = [
        value
        for record, _ in persona
        for key, value in record["user_persona"].get("兴趣偏好", {}).get("商品属性偏好", {}).items()
        if key not in ("价格区间", "尺码", "鞋码", "尺寸", "颜色") and isinstance(value, list) and value
    ]
    material = sum("材质" in r["user_persona"].get("兴趣偏好", {}).get("商品属性偏好", {}) for r, _ in persona)
    from .vocabulary import load_vocabulary

    leaves = {leaf.name: leaf for leaf in load_vocabulary().leaves}
    naming = searched = 0
    for record, _ in persona:
        leaf = leaves.get(record["product_category"])
        words = (leaf.noun, *leaf.synonyms, *leaf.uses) if leaf else ()
        for search in record["user_persona"].get("行为特征", {}).get("最近14天搜索关键词", []):
            searched += 1
            naming += any(word in search for word in words)
    return {
        "mean_preference_items": statistics.fmean(len(v) for v in lists) if lists else 0.0,
        "material_preference_share": material / count,
        "search_names_product_share": naming / max(1, searched),
        "decidable_share": sum(not a.problems for _, a in persona) / count,
        "gold_dearest_in_budget_share": tells["gold_dearest_in_budget_share"],
        "gold_dearest_chance": tells["gold_dearest_chance"],
        "gold_budget_rank": tells["gold_budget_rank"],
        "gold_to_ceiling_median": tells["gold_to_ceiling_median"],
        "others_to_ceiling_median": tells["others_to_ceiling_median"],
        "avg_order_gold_log_correlation": tells["avg_order_gold_log_correlation"],
        "price_range_contains_gold_share": tells["price_range_contains_gold_share"],
        "user_fields_fixed_share": sum(len(keys) == 1 for keys in multi) / max(1, len(multi)),
        "held_out_unseen_form_share": sum(any(f not in train_forms for f in a.forms) for a in held) / max(1, len(held)),
        "held_out_form_unseen_share": sum(f not in train_forms for f in form_uses) / max(1, len(form_uses)),
        "size_axis_priced_share": axis["size_axis_priced_share"],
        "numbered_axis_misordered_share": axis["numbered_axis_misordered_share"],
    }


def _names_two(text: str, values: tuple[str, ...]) -> bool:
    """Whether ``text`` names two of ``values`` (食品级不锈钢 alone is not also 不锈钢)."""
    named = [v for v in values if v in text]
    return len([v for v in named if not any(v != w and v in w for w in named)]) > 1


def text_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """v7.1 text figures, over every product (its title, attributes, description and bullets):

    - ``contradictory_text_share``: products whose text names two values of one exclusive attribute group of
      their leaf (``facet:a/b`` in ``vocab/catalog.json``: 高帮 and 低帮, 小型犬 and 中大型犬, a 幼犬期 scene on
      成犬 food). The option bullet (``【可选…】``) is left out: it lists alternatives by design.
    - ``other_kind_share``: products of a leaf of one kind naming another kind of its domain anywhere, options
      included (猫 on a dog leash; ``kinds`` in ``vocab/catalog.json``).
    """
    from .vocabulary import load_vocabulary

    leaves = {leaf.name: leaf for leaf in load_vocabulary().leaves}
    contradictory = other_kind = 0
    for record in records:
        leaf = leaves.get(record["product_category"])
        if leaf is None:
            continue
        bullets = [b for b in record.get("small_description", []) if not b.startswith("【可选")]
        own = " ".join([record["title"], *record.get("attribute", []), *bullets])
        contradictory += any(_names_two(own, slot.values) for slot in leaf.slots if len(slot.values) > 1)
        everything = own + record.get("full_description", "") + json.dumps(
            record.get("customization_options", {}), ensure_ascii=False) + "".join(record.get("small_description", []))
        other_kind += any(word in everything for word in leaf.foreign)
    count = max(1, len(records))
    return {"contradictory_text_share": contradictory / count, "other_kind_share": other_kind / count}


def real_budget_shape_counts(annotations: list[dict[str, Any]]) -> Counter[str]:
    """How often each shape of the real annotation evidence strings occurs (its singletons: the long tail)."""
    return Counter(budget_shape(str(a.get("evidence") or "")) for a in annotations if a.get("evidence"))
