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
from .decidable import task_problems
from .instructions import Requirements, join_attributes, option_phrase, tidy
from .phrasing import Phrasing, pick_form
from .products import ProductDraft, plain_value
from .realism import rule_violations
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
    price_level: float = 0.5
    """v7: where in a leaf's price range this shopper buys (0 cheapest, 1 dearest); fixed per user."""
    price_width: float = 0.3
    held_out: bool = False
    """v7: the user's tasks fall into the val/test persona split (predicted), so they draw held-out phrasing."""
    price_ranges: dict[str, dict[str, float]] = field(default_factory=dict)


def _pairs(rows: list[list[Any]]) -> list[tuple[float, Any]]:
    return [(float(weight), value) for value, weight in rows]


_LEVEL_SPEND = {"低": (60.0, 0.2), "中": (150.0, 0.45), "中高": (320.0, 0.65), "高": (700.0, 0.8)}
"""v7: consumption level → (typical 平均客单价, price level within a leaf): the user's, never the gold's."""
_LEVEL_TAG = {"低": "low", "中": "mid", "中高": "high", "高": "high"}


def life_tags(vocab: Vocabulary) -> list[str]:
    """Every domain tag of the vocabulary (宝妈, 夜市经营者, 学生党 …), in vocabulary order."""
    return list(dict.fromkeys(tag for leaf in vocab.leaves for tag in leaf.tags))


def make_user(user_id: str, vocab: Vocabulary, noise_brands: list[str], rng: random.Random) -> User:
    """A shopper: demographics, region, trading habits, price level and tags, all fixed across their tasks."""
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
    spend, level = _LEVEL_SPEND[str(demographics["消费等级"])]
    trading = {
        "复购率": round(rng.uniform(0.05, 0.75), 2),
        "是否促销敏感": rng.random() < 0.45,
        "支付方式偏好": pick(rng, data["payments"]),
        "近一年订单数": rng.randint(3, 180),
        "平均客单价": round(spend * math.exp(rng.gauss(0.0, 0.45)), 2),
    }
    fitting = [tag for tag in life_tags(vocab) if not rule_violations(demographics, [tag])]
    tags = [
        *pick_many(rng, fitting, rng.randint(1, 2)),
        *pick_many(rng, data["general_tags"], rng.randint(0, 2)),
        data["price_tags"][_LEVEL_TAG[str(demographics["消费等级"])]],
    ]
    brands = pick_many(rng, noise_brands, min(len(noise_brands), rng.randint(1, 2)))
    user = User(user_id, demographics, region, trading, list(dict.fromkeys(tags)), brands)
    user.price_level = min(0.95, max(0.05, level + rng.uniform(-0.15, 0.15)))
    user.price_width = rng.uniform(0.2, 0.4)
    return user


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
    phrasing: Phrasing | None = None,
) -> str:
    attrs = [value for axis, value in kept if not axis]
    opts = [_described_option(draft, axis, value, vocab, rng) for axis, value in kept if axis]
    kept_phrase = (join_attributes(attrs, vocab, rng, phrasing) + "的") if attrs else ""
    template = pick_form(rng, vocab.text["simple_templates"], phrasing) or vocab.text["simple_templates"][0]
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
    problems: list[str] = field(default_factory=list)
    """v7: what the decidability check still finds (empty for a task decidable from public information)."""
    phrasing: Phrasing | None = None


def user_price_range(user: User, leaf_range: tuple[float, float], leaf_name: str) -> dict[str, float]:
    """v7: the user's 价格区间 for a leaf: their price level within the leaf's range, never the gold's price
    (v6.1 drew it around the gold, so it held the gold price in 100% of tasks); the same for every task of the
    user in that leaf."""
    if leaf_name not in user.price_ranges:
        low, high = leaf_range
        span = math.log(high / low)
        lo = low * math.exp(span * max(0.0, user.price_level - user.price_width))
        hi = low * math.exp(span * min(1.0, user.price_level + user.price_width))
        step = price_step(lo)
        user.price_ranges[leaf_name] = {
            "最小值": max(0.0, math.floor(lo / step) * step), "最大值": math.ceil(hi / price_step(hi)) * price_step(hi)
        }
    return dict(user.price_ranges[leaf_name])


def _rivals(draft: ProductDraft, axis: str, value: str) -> list[str]:
    """Other values of ``axis`` a persona may also like: only ones the gold product does not offer (v7), so a
    liked rival never competes with the gold value on the gold's own option list."""
    offered = {plain_value(draft, entry["value"]) for entry in draft.record["customization_options"].get(axis, [])}
    return [v for a in draft.leaf.axes if a.name == axis for v in a.values if v != value and v not in offered]


def _decisive(table: dict[str, Any], value: str, leaf_attributes: tuple[str, ...]) -> list[str]:
    """Forms of ``value`` in a cue/paraphrase table that no other attribute of the leaf shares (v7: a cue listed
    under 耐用 and 厚实 does not decide which one the shopper means) and that spell no attribute word."""
    others = {form for attribute in leaf_attributes if attribute != value for form in table.get(attribute, ())}
    return [
        form for form in table.get(value, ())
        if form not in others and not any(attribute in form.replace("{noun}", "") for attribute in leaf_attributes)
    ]


def build_persona(
    draft: ProductDraft,
    req: Requirements,
    user: User,
    omitted: list[tuple[str, str]],
    siblings: list[ProductDraft],
    unrelated_nouns: list[str],
    vocab: Vocabulary,
    rng: random.Random,
    phrasing: Phrasing | None = None,
    hidden_budget: str = "",
) -> tuple[dict[str, Any], str]:
    """The persona dict for one task, with evidence for every omitted requirement; returns (persona, evidence).

    v7: every omitted requirement gets one decisive piece of evidence and nothing in the persona competes with it
    (liked rival option values are ones the gold does not offer, distractor attributes come from slots the gold
    does not use, cues and paraphrases shared by two attributes of the leaf are not used); a budget the short
    request leaves out is in a recent search; price fields and tags are the user's.
    """
    data = vocab.personas
    leaf = draft.leaf
    phrasing = phrasing or Phrasing()
    prefs: dict[str, Any] = {"价格区间": user_price_range(user, leaf.price_range, leaf.name)}
    searches: list[str] = []
    evidence: list[str] = []
    leaf_attributes = leaf.all_attributes()

    def add_pref(facet: str, value: str) -> None:
        bucket = prefs.setdefault(facet, [])
        if value not in bucket:
            bucket.append(value)

    def add_option_pref(facet: str, axis: str, value: str) -> None:
        """The gold value, sometimes with one or two values the gold product does not offer."""
        others = _rivals(draft, axis, value) if axis else []
        if others and rng.random() < MULTI_VALUE_SHARE:
            liked = [value, *pick_many(rng, others, min(len(others), rng.randint(1, 2)))]
            rng.shuffle(liked)
            for item in liked:
                add_pref(facet, item)
        else:
            add_pref(facet, value)

    def search_for(value: str, noun: str) -> str:
        return phrasing.pick(rng, data["search_templates"]).format(value=value, noun=noun, use=req.use)

    paraphrases = vocab.paraphrases["phrases"]
    implied: dict[str, Any] = data["implied_cues"]
    for axis, seller in omitted:
        value = plain_value(draft, seller) if axis else seller  # a shopper prefers 黑色, not 黑色【现货速发】
        facet = _OPTION_FACETS.get(axis, axis) if axis else leaf.facet_of(value)
        cues = phrasing.allowed(_decisive(implied, value, leaf_attributes), implied.get(value, [])) if not axis else []
        if cues and rng.random() < IMPLIED_EVIDENCE_SHARE:
            cue = phrasing.pick(rng, cues, implied.get(value, [])).format(noun=req.noun)
            searches.append(cue)
            evidence.append(f"最近搜索“{cue}”暗示需要“{value}”")
            continue
        said = phrasing.allowed(_decisive(paraphrases, value, leaf_attributes), paraphrases.get(value, [])) if not axis else []
        if said and rng.random() < PARAPHRASE_EVIDENCE_SHARE:
            # v4.1: the only evidence is a paraphrase (用得久 for 耐用), never the attribute word itself
            phrase = phrasing.pick(rng, said, paraphrases.get(value, []))
            search = search_for(phrase, req.noun)
            searches.append(search)
            evidence.append(f"最近搜索“{search}”（“{phrase}”即“{value}”）")
            continue
        place = rng.random()
        if place < 0.4 or (not axis and place < 0.5):
            add_option_pref(facet, axis, value)
            evidence.append(f"{facet}偏好含“{value}”")
        elif place < 0.75:
            search = search_for(value, req.noun)
            searches.append(search)
            evidence.append(f"最近搜索“{search}”")
            rival = _rivals(draft, axis, value) if axis else []
            if rival and rng.random() < MULTI_VALUE_SHARE:
                # v5.1: the shopper compared values before deciding (v7: with one the gold does not offer)
                searches.append(search_for(pick(rng, rival), req.noun))
        else:
            add_option_pref(facet, axis, value)
            searches.append(search_for(value, leaf.noun))
            evidence.append(f"{facet}偏好与最近搜索都指向“{value}”")
    if hidden_budget:
        search = phrasing.pick(rng, data["budget_search_templates"]).format(noun=req.noun, budget=hidden_budget)
        searches.append(search)
        evidence.append(f"最近搜索“{search}”给出预算")

    noise: list[str] = []
    own = set(draft.record["attribute"])
    free_slots = [slot for slot in leaf.slots if not own & set(slot.values)]
    others = [value for slot in free_slots for value in slot.values]
    if others and rng.random() < 0.6:  # preferences this task does not need, never a rival of a gold attribute
        for distractor in pick_many(rng, others, min(len(others), rng.randint(1, 2))):
            add_pref(leaf.facet_of(distractor), distractor)
            noise.append(f"“{distractor}”是无关偏好")
    named = [a for a in draft.record["attribute"] if a not in {value for _, value in omitted}]
    if named and rng.random() < 0.5:  # v7: the shopper's usual tastes include some of this product's qualities
        for liked in pick_many(rng, named, min(len(named), rng.randint(1, 2))):
            add_pref(leaf.facet_of(liked), liked)
    if rng.random() < 0.5:
        searches.append(phrasing.pick(rng, data["plain_search_templates"]).format(noun=leaf.noun, use=req.use))
    for noun in pick_many(rng, unrelated_nouns, min(len(unrelated_nouns), rng.randint(1, 2))):
        searches.append(phrasing.pick(rng, data["plain_search_templates"]).format(
            noun=noun, use=pick(rng, ("家里", "自己", "送人"))
        ))
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
    brands = list(user.brand_noise)
    if rng.random() < float(data["brand_gold_share"]) and draft.brand.name not in brands:
        # v4: the user's brand is sometimes the one of the gold product (evidence that decides between siblings)
        brands.insert(rng.randrange(len(brands) + 1), draft.brand.name)
        evidence.append(f"品牌偏好含“{draft.brand.name}”")
    day = rng.randint(1, 28)
    persona: dict[str, Any] = {
        "用户ID": user.user_id,
        "人口属性": dict(user.demographics),
        "地区信息": dict(user.region),
        "交易特征": dict(user.trading),
        "兴趣偏好": {"品牌偏好": brands, "商品属性偏好": prefs, "类目偏好": category_prefs},
        "行为特征": {
            "最近14天搜索关键词": searches,
            "最近浏览商品": viewed,
            "收藏商品": saved,
            "活跃时段": pick(rng, data["active_times"]),
            "访问频率": pick(rng, data["visit_frequencies"]),
            "最近活跃时间": f"2024-{rng.randint(1, 12):02d}-{day:02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
        },
        "用户标签": list(user.tags),
    }
    omitted_text = "、".join(value for _, value in omitted) or "无"
    persona["__reasoning__"] = data["reasoning"].format(
        evidence="；".join(evidence) or "无", omitted=omitted_text, noise="；".join(noise)
    )
    return persona, "；".join(evidence)


DECIDABLE_TRIES = 6
"""v7: persona draws tried per task until the decidability check passes (what fails after that is counted)."""


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
    """Persona + short request for one task; the request is unique (normalised) among ``taken``.

    v7: the pair is checked with :func:`decidable.task_problems` (the reward's own matching) and drawn again
    until every scored requirement is decided by public evidence; ``PersonaTask.problems`` keeps what is left.
    """
    kept, omitted = _omitted_split(req, rng)
    hidden = [value for axis, value in omitted if not axis]
    if any(value in req.use for value in hidden):
        # the use scene (送礼用) must not say an omitted attribute (送礼): the short request takes another scene
        use = next((u for u in draft.leaf.uses if not any(value in u for value in hidden)), "")
        req = dataclasses.replace(req, use=use)
    with_budget = bool(req.budget.phrase) and rng.random() < 0.96
    best: PersonaTask | None = None
    for _ in range(DECIDABLE_TRIES):
        phrasing = Phrasing(held_out=user.held_out)
        task = _draw(draft, req, user, list(kept), list(omitted), with_budget, siblings, unrelated_nouns,
                     taken, normalize, vocab, rng, phrasing)
        if best is None or len(task.problems) < len(best.problems):
            best = task
        if not task.problems:
            break
    assert best is not None
    taken.add(normalize(best.simple))
    user.task_count += 1
    if draft.leaf.domain not in user.domains:
        user.domains.append(draft.leaf.domain)
    return best


def _draw(
    draft: ProductDraft,
    req: Requirements,
    user: User,
    kept: list[tuple[str, str]],
    omitted: list[tuple[str, str]],
    with_budget: bool,
    siblings: list[ProductDraft],
    unrelated_nouns: list[str],
    taken: set[str],
    normalize: Any,
    vocab: Vocabulary,
    rng: random.Random,
    phrasing: Phrasing,
) -> PersonaTask:
    simple = simple_text(draft, req, kept, with_budget, vocab, rng, phrasing=phrasing)
    while len(simple) > SIMPLE_MAX_CHARS and kept:
        omitted.append(kept.pop())
        simple = simple_text(draft, req, kept, with_budget, vocab, rng, phrasing=phrasing)
    fillers = vocab.text["simple_fillers"]
    attempt = 0
    while len(simple) < SIMPLE_MIN_CHARS or normalize(simple) in taken:
        attempt += 1
        filler = fillers[attempt % len(fillers)] if attempt < len(fillers) * 3 else f"，第{attempt}次找"
        simple = simple_text(draft, req, kept, with_budget, vocab, rng, filler=filler, phrasing=phrasing)
    hidden_budget = req.budget.phrase if req.budget.ceiling is not None and not with_budget else ""
    persona, _ = build_persona(
        draft, req, user, omitted, siblings, unrelated_nouns, vocab, rng, phrasing, hidden_budget
    )
    problems = task_problems(
        simple, persona, draft.record, req.attributes, [value for _, value in req.options], req.budget.ceiling,
        draft.leaf, vocab,
    )
    return PersonaTask(simple, persona, omitted, problems, phrasing)
