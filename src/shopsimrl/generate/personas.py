"""Shopper personas and the short persona-mode request (``instruction_simple``).

A persona task hides one or more requirements of the full instruction from the short request and puts
evidence for each of them into the persona (attribute preferences, recent searches), next to realistic
noise: an unrelated brand preference, empty size fields, unrelated searches, a distracting attribute.
Users can own several tasks; their stable fields (id, demographics, region, trading habits, tags) are
shared, so the persona split links those tasks into one group.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from typing import Any

from .budgets import price_step, weighted_choice
from .instructions import Requirements, join_attributes, option_phrase, tidy
from .products import ProductDraft, plain_value
from .realism import tag_clashes
from .rng import pick, pick_many
from .vocabulary import Vocabulary

SIMPLE_MIN_CHARS = 15
SIMPLE_MAX_CHARS = 40
PARAPHRASE_EVIDENCE_SHARE = 0.5
"""v4.1: share of omitted attributes (with a paraphrase) whose only persona evidence is that paraphrase."""
IMPLIED_EVIDENCE_SHARE = 0.8
"""v5: share of omitted attributes (with an implied cue) whose only persona evidence is a situation that implies
them (晚上用不吵人的风扇 for 静音): no attribute word, no paraphrase of the table; reading it needs inference."""
OMIT_COUNT_WEIGHTS = ((0.55, 1), (0.37, 2), (0.08, 3))
MULTI_VALUE_SHARE = 0.75
"""v5.1: share of option preferences that list one or two more values of the same axis next to the gold one
(颜色偏好 黑色、白色, as real personas do): the preference narrows the choice without deciding it."""
_OPTION_FACETS = {"颜色分类": "颜色", "尺码": "尺码", "鞋码": "鞋码", "参考身高": "尺码"}


@dataclass
class User:
    """The stable part of a persona, shared by every task of the user."""

    user_id: str
    demographics: dict[str, Any]
    region: dict[str, Any]
    trading: dict[str, Any]
    tags: list[str]
    brand_noise: list[str]
    task_count: int = 0
    domains: list[str] = field(default_factory=list)


def _pairs(rows: list[list[Any]]) -> list[tuple[float, Any]]:
    return [(float(weight), value) for value, weight in rows]


def make_user(user_id: str, vocab: Vocabulary, noise_brands: list[str], rng: random.Random) -> User:
    data = vocab.personas
    province = pick(rng, list(data["regions"]))
    city = pick(rng, data["regions"][province])
    age = weighted_choice(rng, _pairs(data["age_bands"]))
    gender = weighted_choice(rng, _pairs(data["genders"]))
    rules = data["occupation_rules"]
    occupations = [
        job
        for job in data["occupations"]
        if all(value in rules.get(job, {}).get(key, [value]) for key, value in (("性别", gender), ("年龄段", age)))
    ]
    demographics = {
        "年龄段": age,
        "性别": gender,
        "会员等级": weighted_choice(rng, _pairs(data["member_levels"])),
        "消费等级": pick(rng, data["consumption_levels"]),
        "职业": pick(rng, occupations),
    }
    region = {"省份": province, "城市": city, "区县": pick(rng, data["city_districts"][city]), "时区": "UTC+8"}
    trading = {
        "复购率": round(rng.uniform(0.05, 0.75), 2),
        "是否促销敏感": rng.random() < 0.45,
        "支付方式偏好": pick(rng, data["payments"]),
        "近一年订单数": rng.randint(3, 180),
    }
    tags = pick_many(rng, data["general_tags"], rng.randint(0, 2))
    brands = pick_many(rng, noise_brands, min(len(noise_brands), rng.randint(1, 2)))
    return User(user_id, demographics, region, trading, tags, brands)


def _omitted_split(req: Requirements, rng: random.Random) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Split the requirements into (kept, omitted); items are ("", attribute) or (axis, value)."""
    items = [("", attribute) for attribute in req.attributes] + list(req.options)
    count = min(len(items), weighted_choice(rng, OMIT_COUNT_WEIGHTS))
    omitted_idx = set(pick_many(rng, range(len(items)), count))
    kept = [item for i, item in enumerate(items) if i not in omitted_idx]
    omitted = [item for i, item in enumerate(items) if i in omitted_idx]
    return kept, omitted


DESCRIBED_OPTION_SHARE = 0.5
_DESCRIBED = {
    "low": ("{axis}要最小的那档", "要最便宜的那个{axis}", "{axis}选最低的那档就行"),
    "high": ("{axis}要最大的那档", "要最大的那个{axis}", "{axis}选最高的那档"),
    "low2": ("{axis}要小一点的那个", "两个{axis}里选小的那个", "要便宜点的那个{axis}"),
    "high2": ("{axis}要大一点的那个", "要大一点的那个{axis}", "两个{axis}里选大的那个"),
}


def _described_option(draft: ProductDraft, axis: str, value: str, vocab: Vocabulary, rng: random.Random) -> str:
    """The option as a shopper says it: on a priced amount axis, half the end values are described, not copied."""
    values = [entry["value"] for entry in draft.record["customization_options"].get(axis, [])]
    if draft.price_axes and axis == draft.price_axes[0] and len(values) >= 2 and rng.random() < DESCRIBED_OPTION_SHARE:
        end = "low" if value == values[0] else "high" if value == values[-1] else ""
        prices = [entry.get("price") for entry in draft.record["customization_options"][axis]]
        if end and all(p is not None for p in prices) and prices == sorted(prices) and len(set(prices)) == len(prices):
            # v5: of two values, "the bigger one" (大一点的那个) names the gold exactly
            return pick(rng, _DESCRIBED[end + ("2" if len(values) == 2 else "")]).format(axis=axis)
    return option_phrase(axis, plain_value(draft, value), vocab, rng, seller=value)


def simple_text(
    draft: ProductDraft,
    req: Requirements,
    kept: list[tuple[str, str]],
    with_budget: bool,
    vocab: Vocabulary,
    rng: random.Random,
    filler: str = "",
) -> str:
    attrs = [value for axis, value in kept if not axis]
    opts = [_described_option(draft, axis, value, vocab, rng) for axis, value in kept if axis]
    kept_phrase = (join_attributes(attrs, vocab, rng) + "的") if attrs else ""
    template = pick(rng, vocab.text["simple_templates"])
    text = template.format(
        unit=draft.leaf.unit,
        kept=kept_phrase,
        noun=req.simple_noun or req.noun,
        budget=req.budget.phrase if with_budget else "",
        use=req.use,
    )
    if opts:
        text = text + "，" + "，".join(opts)
    if filler:
        text = text + filler.format(use=req.use)
    return tidy(text)


@dataclass
class PersonaTask:
    simple: str
    persona: dict[str, Any]
    omitted: list[tuple[str, str]]


def _price_range(gold: float, rng: random.Random) -> dict[str, float]:
    low = gold * rng.uniform(0.4, 0.85)
    high = gold * rng.uniform(1.2, 2.2)
    step = price_step(gold)
    return {"最小值": max(0.0, math.floor(low / step) * step), "最大值": math.ceil(high / step) * step}


def build_persona(
    draft: ProductDraft,
    req: Requirements,
    user: User,
    omitted: list[tuple[str, str]],
    siblings: list[ProductDraft],
    unrelated_nouns: list[str],
    vocab: Vocabulary,
    rng: random.Random,
) -> tuple[dict[str, Any], str]:
    """The persona dict for one task, with evidence for every omitted requirement; returns (persona, evidence)."""
    data = vocab.personas
    leaf = draft.leaf
    prefs: dict[str, Any] = {"价格区间": _price_range(draft.gold_price, rng)}
    searches: list[str] = []
    evidence: list[str] = []

    def add_pref(facet: str, value: str) -> None:
        bucket = prefs.setdefault(facet, [])
        if value not in bucket:
            bucket.append(value)

    def add_option_pref(facet: str, axis: str, value: str) -> None:
        """The gold value, sometimes with one or two other values of the axis the shopper also likes."""
        others = [v for a in leaf.axes if axis and a.name == axis for v in a.values if v != value]
        if others and rng.random() < MULTI_VALUE_SHARE:
            liked = [value, *pick_many(rng, others, min(len(others), rng.randint(1, 2)))]
            rng.shuffle(liked)
            for item in liked:
                add_pref(facet, item)
        else:
            add_pref(facet, value)

    paraphrases = vocab.paraphrases["phrases"]
    implied: dict[str, list[str]] = data["implied_cues"]
    for axis, seller in omitted:
        value = plain_value(draft, seller) if axis else seller  # a shopper prefers 黑色, not 黑色【现货速发】
        facet = _OPTION_FACETS.get(axis, axis) if axis else leaf.facet_of(value)
        cues = implied.get(value) if not axis else None
        if cues and rng.random() < IMPLIED_EVIDENCE_SHARE:
            cue = pick(rng, cues).format(noun=req.noun)
            if not any(attribute in cue for attribute in leaf.all_attributes()):
                searches.append(cue)
                evidence.append(f"最近搜索“{cue}”暗示需要“{value}”")
                continue
        said = paraphrases.get(value) if not axis else None
        if said and rng.random() < PARAPHRASE_EVIDENCE_SHARE:
            # v4.1: the only evidence is a paraphrase (用得久 for 耐用), never the attribute word itself
            phrase = pick(rng, said)
            search = pick(rng, data["search_templates"]).format(value=phrase, noun=req.noun, use=req.use)
            searches.append(search)
            evidence.append(f"最近搜索“{search}”（“{phrase}”即“{value}”）")
            continue
        place = rng.random()
        if place < 0.4 or (not axis and place < 0.5):
            add_option_pref(facet, axis, value)
            evidence.append(f"{facet}偏好含“{value}”")
        elif place < 0.75:
            search = pick(rng, data["search_templates"]).format(value=value, noun=req.noun, use=req.use)
            searches.append(search)
            evidence.append(f"最近搜索“{search}”")
            rival = [v for a in leaf.axes if axis and a.name == axis for v in a.values if v != value]
            if rival and rng.random() < MULTI_VALUE_SHARE:
                # v5.1: the shopper compared values before deciding (黑色 and 白色 both searched)
                other = pick(rng, rival)
                searches.append(pick(rng, data["search_templates"]).format(value=other, noun=req.noun, use=req.use))
        else:
            add_option_pref(facet, axis, value)
            search = pick(rng, data["search_templates"]).format(value=value, noun=leaf.noun, use=req.use)
            searches.append(search)
            evidence.append(f"{facet}偏好与最近搜索都指向“{value}”")

    noise: list[str] = []
    others = [a for a in leaf.all_attributes() if a not in draft.record["attribute"]]
    if others and rng.random() < 0.6:  # v4: preferences that this task does not need (some conflict with it)
        for distractor in pick_many(rng, others, min(len(others), rng.randint(1, 2))):
            add_pref(leaf.facet_of(distractor), distractor)
            noise.append(f"“{distractor}”是无关偏好")
    if rng.random() < 0.5:
        searches.append(pick(rng, data["plain_search_templates"]).format(noun=leaf.noun, use=req.use))
    for noun in pick_many(rng, unrelated_nouns, min(len(unrelated_nouns), rng.randint(1, 2))):
        searches.append(pick(rng, data["plain_search_templates"]).format(noun=noun, use=pick(rng, ("家里", "自己", "送人"))))
    rng.shuffle(searches)
    size_field = pick(rng, data["size_fields"])
    if size_field not in prefs:
        prefs[size_field] = "" if rng.random() < 0.5 else []
    noise.append("尺码类字段为空")

    category_prefs = {leaf.domain: "高"}
    for domain in user.domains[-2:]:
        category_prefs.setdefault(domain, pick(rng, data["category_levels"]))
    names = list(dict.fromkeys(s.brand.name + s.leaf.noun for s in siblings))
    viewed = names[:3]
    saved = names[3:4] if rng.random() < 0.5 else []
    price_tag = data["price_tags"]["low" if draft.gold_price < 100 else "mid" if draft.gold_price < 1000 else "high"]
    leaf_tags = [t for t in leaf.tags if t not in tag_clashes(str(user.demographics["性别"]), [t])]
    tags = [*pick_many(rng, leaf_tags, min(len(leaf_tags), rng.randint(1, 2))), price_tag, *user.tags]
    brands = list(user.brand_noise)
    if rng.random() < float(data["brand_gold_share"]) and draft.brand.name not in brands:
        # v4: the user's brand is sometimes the one of the gold product (evidence that decides between siblings)
        brands.insert(rng.randrange(len(brands) + 1), draft.brand.name)
        evidence.append(f"品牌偏好含“{draft.brand.name}”")
    trading = dict(user.trading)
    trading["平均客单价"] = round(draft.gold_price * rng.uniform(0.3, 1.4), 2)
    day = rng.randint(1, 28)
    persona: dict[str, Any] = {
        "用户ID": user.user_id,
        "人口属性": dict(user.demographics),
        "地区信息": dict(user.region),
        "交易特征": trading,
        "兴趣偏好": {"品牌偏好": brands, "商品属性偏好": prefs, "类目偏好": category_prefs},
        "行为特征": {
            "最近14天搜索关键词": searches,
            "最近浏览商品": viewed,
            "收藏商品": saved,
            "活跃时段": pick(rng, data["active_times"]),
            "访问频率": pick(rng, data["visit_frequencies"]),
            "最近活跃时间": f"2024-{rng.randint(1, 12):02d}-{day:02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
        },
        "用户标签": tags,
    }
    omitted_text = "、".join(value for _, value in omitted) or "无"
    persona["__reasoning__"] = data["reasoning"].format(
        evidence="；".join(evidence) or "无", omitted=omitted_text, noise="；".join(noise)
    )
    return persona, "；".join(evidence)


def persona_task(
    draft: ProductDraft,
    req: Requirements,
    user: User,
    siblings: list[ProductDraft],
    unrelated_nouns: list[str],
    taken: set[str],
    normalize: Any,
    vocab: Vocabulary,
    rng: random.Random,
) -> PersonaTask:
    """Persona + short request for one task; the request is unique (normalised) among ``taken``."""
    kept, omitted = _omitted_split(req, rng)
    hidden = [value for axis, value in omitted if not axis]
    if any(value in req.use for value in hidden):
        # the use scene (送礼用) must not say an omitted attribute (送礼): the short request takes another scene
        use = next((u for u in draft.leaf.uses if not any(value in u for value in hidden)), "")
        req = dataclasses.replace(req, use=use)
    with_budget = bool(req.budget.phrase) and rng.random() < 0.96
    simple = simple_text(draft, req, kept, with_budget, vocab, rng)
    while len(simple) > SIMPLE_MAX_CHARS and kept:
        omitted.append(kept.pop())
        simple = simple_text(draft, req, kept, with_budget, vocab, rng)
    fillers = vocab.text["simple_fillers"]
    attempt = 0
    while len(simple) < SIMPLE_MIN_CHARS or normalize(simple) in taken:
        attempt += 1
        filler = fillers[attempt % len(fillers)] if attempt < len(fillers) * 3 else f"，第{attempt}次找"
        simple = simple_text(draft, req, kept, with_budget, vocab, rng, filler=filler)
    taken.add(normalize(simple))
    persona, _ = build_persona(draft, req, user, omitted, siblings, unrelated_nouns, vocab, rng)
    user.task_count += 1
    if draft.leaf.domain not in user.domains:
        user.domains.append(draft.leaf.domain)
    return PersonaTask(simple, persona, omitted)
