"""Persona evidence for the requirements a short request leaves out, and the persona dict around it.

Each omitted requirement gets one decisive piece of public evidence (an attribute preference, a recent search,
a paraphrase or an implied situation), next to realistic noise: unrelated brands, empty size fields, unrelated
searches, preferences this task does not need. Nothing competes with the evidence (see ``build_persona``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .bundles import parts_of
from .instructions import Requirements
from .phrasing import Phrasing
from .products import ProductDraft, no_repeats, plain_value
from .rng import pick, pick_many
from .users import User, user_price_range
from .vocabulary import Leaf, Vocabulary

PARAPHRASE_EVIDENCE_SHARE = 0.5
"""Share of omitted attributes (with a paraphrase) whose only persona evidence is that paraphrase."""
IMPLIED_EVIDENCE_SHARE = 0.8
"""Share of omitted attributes (with an implied cue) whose only persona evidence is a situation that implies
them (晚上用不吵人的风扇 for 静音): no attribute word, no paraphrase of the table; reading it needs inference."""
MULTI_VALUE_SHARE = 0.75
"""Share of option preferences that list one or two more values of the same axis next to the gold one
(颜色偏好 黑色、白色, as real personas do); only values the gold product does not offer, so none competes."""
DISTRACTOR_SHARE = 0.75
"""Share of personas with 1–3 attribute preferences this task does not need (:func:`distractor_values`: never a
rival of a required attribute)."""
OWN_DISTRACTOR_SHARE = 0.4
"""Share of distractor lists in which one item is an attribute the gold has but the task does not require."""
_OPTION_FACETS = {"颜色分类": "颜色", "尺码": "尺码", "鞋码": "鞋码", "参考身高": "尺码"}


def _rivals(draft: ProductDraft, axis: str, value: str) -> list[str]:
    """Other values of ``axis`` a persona may also like: only ones the gold product does not offer, so a
    liked rival never competes with the gold value on the gold's own option list."""
    offered = {plain_value(draft, entry["value"]) for entry in draft.record["customization_options"].get(axis, [])}
    return [v for a in draft.leaf.axes if a.name == axis for v in a.values if v != value and v not in offered]


def _decisive(table: dict[str, Any], value: str, leaf_attributes: tuple[str, ...]) -> list[str]:
    """Forms of ``value`` in a cue/paraphrase table that no other attribute of the leaf shares (a cue listed
    under 耐用 and 厚实 does not decide which one the shopper means) and that spell no attribute word."""
    others = {form for attribute in leaf_attributes if attribute != value for form in table.get(attribute, ())}
    return [
        form for form in table.get(value, ())
        if form not in others and not any(attribute in form.replace("{noun}", "") for attribute in leaf_attributes)
    ]


def _noise(
    draft: ProductDraft, req: Requirements, prefs: dict[str, Any], searches: list[str], unrelated_nouns: list[str],
    add_pref: Callable[[str, str], None], data: dict[str, Any], phrasing: Phrasing, rng: random.Random,
) -> list[str]:
    """Realistic noise around the evidence: unneeded preferences, plain and unrelated searches, the size field."""
    leaf = draft.leaf
    noise: list[str] = []
    others = distractor_values(draft, req)
    if others and rng.random() < DISTRACTOR_SHARE:  # preferences this task does not need, never a goal rival
        chosen = pick_many(rng, others, min(len(others), rng.randint(1, 3)))
        own = [a for a in draft.record["attribute"] if a in others and a not in chosen]
        if own and rng.random() < OWN_DISTRACTOR_SHARE:
            # the gold holds a preference word as often as a random listing of its leaf (the gold has fewer free
            # slots than a rival, since its required attributes fill some)
            chosen[rng.randrange(len(chosen))] = pick(rng, own)
        for distractor in chosen:
            add_pref(leaf.facet_of(distractor), distractor)
            noise.append(f"“{distractor}”是无关偏好")
    if rng.random() < 0.5 or not searches:  # every persona has searched for what it is about to buy
        searches.append(no_repeats(phrasing.pick(rng, data["plain_search_templates"]).format(noun=leaf.noun, use=req.use)))
    for noun in pick_many(rng, unrelated_nouns, min(len(unrelated_nouns), rng.randint(0, 1))):
        searches.append(no_repeats(phrasing.pick(rng, data["plain_search_templates"]).format(
            noun=noun, use=pick(rng, ("家用", "自用", "送人"))  # no search ending on a bare 自己
        )))
    rng.shuffle(searches)
    noise.extend(_size_field(draft, req, prefs, data["size_fields"], rng))
    return noise


def _persona_dict(
    user: User, leaf: Leaf, siblings: list[ProductDraft], prefs: dict[str, Any], searches: list[str],
    data: dict[str, Any], rng: random.Random,
) -> dict[str, Any]:
    """The persona dict around the preferences and searches: the user's fields, brands, listings, activity."""
    category_prefs = {leaf.domain: "高"}
    for domain in user.domains[-2:]:
        category_prefs.setdefault(domain, pick(rng, data["category_levels"]))
    names = list(dict.fromkeys(s.brand.name + s.leaf.noun for s in siblings))
    viewed = names[:3]
    saved = names[3:4] if rng.random() < 0.5 else []
    brands = list(user.brand_noise)
    liked = pick(rng, siblings).brand.name if siblings else ""
    if liked and rng.random() < float(data["brand_gold_share"]) and liked not in brands:
        # a brand of the leaf the user likes, drawn from its listings: the gold's brand at the rate of any rival,
        # so a liked brand does not point at the gold
        brands.insert(rng.randrange(len(brands) + 1), liked)
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
    return persona


def _omitted_evidence(
    draft: ProductDraft, req: Requirements, omitted: list[tuple[str, str]], searches: list[str],
    add_option_pref: Callable[[str, str, str], None], search_for: Callable[[str, str], str],
    vocab: Vocabulary, phrasing: Phrasing, rng: random.Random,
) -> list[str]:
    """One decisive piece of evidence per omitted requirement (an implied cue, a paraphrase, a preference or a
    search), added to ``searches`` and the preferences; returns the evidence sentences."""
    data = vocab.personas
    leaf = draft.leaf
    leaf_attributes = leaf.all_attributes()
    evidence: list[str] = []
    paraphrases = vocab.paraphrases["phrases"]
    implied: dict[str, Any] = data["implied_cues"]
    for axis, seller in omitted:
        value = plain_value(draft, seller) if axis else seller  # a shopper prefers 黑色, not 黑色【现货速发】
        if axis and axis == draft.extras.get("bundle_axis"):
            value = bundle_words(draft, axis, seller)  # 带充电器和收纳包, not the sentence 要带…的那套
        facet = _OPTION_FACETS.get(axis, axis) if axis else leaf.facet_of(value)
        cues = phrasing.allowed(_decisive(implied, value, leaf_attributes), implied.get(value, [])) if not axis else []
        if cues and rng.random() < IMPLIED_EVIDENCE_SHARE:
            cue = phrasing.pick(rng, cues, implied.get(value, [])).format(noun=req.noun)
            searches.append(cue)
            evidence.append(f"最近搜索“{cue}”暗示需要“{value}”")
            continue
        said = phrasing.allowed(_decisive(paraphrases, value, leaf_attributes), paraphrases.get(value, [])) if not axis else []
        if said and rng.random() < PARAPHRASE_EVIDENCE_SHARE:
            # the only evidence is a paraphrase (用得久 for 耐用), never the attribute word itself
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
                # the shopper compared values before deciding (with one the gold does not offer)
                searches.append(search_for(pick(rng, rival), req.noun))
        else:
            add_option_pref(facet, axis, value)
            searches.append(search_for(value, leaf.noun))
            evidence.append(f"{facet}偏好与最近搜索都指向“{value}”")
    return evidence


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

    Every omitted requirement gets one decisive piece of evidence and nothing in the persona competes with it
    (liked rival option values are ones the gold does not offer, distractor attributes come from slots that hold
    no required attribute, cues and paraphrases shared by two attributes of the leaf are not used); a budget the short
    request leaves out is in a recent search; price fields and tags are the user's.
    """
    data = vocab.personas
    leaf = draft.leaf
    phrasing = phrasing or Phrasing()
    prefs: dict[str, Any] = {"价格区间": user_price_range(user, leaf.price_range, leaf.name, req.budget.ceiling, rng)}
    searches: list[str] = []

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
        return no_repeats(phrasing.pick(rng, data["search_templates"]).format(value=value, noun=noun, use=req.use))

    evidence = _omitted_evidence(draft, req, omitted, searches, add_option_pref, search_for, vocab, phrasing, rng)
    if hidden_budget:
        search = phrasing.pick(rng, data["budget_search_templates"]).format(noun=req.noun, budget=hidden_budget)
        searches.append(search)
        evidence.append(f"最近搜索“{search}”给出预算")

    noise = _noise(draft, req, prefs, searches, unrelated_nouns, add_pref, data, phrasing, rng)
    persona = _persona_dict(user, leaf, siblings, prefs, searches, data, rng)
    omitted_text = "、".join(value for _, value in omitted) or "无"
    persona["__reasoning__"] = data["reasoning"].format(
        evidence="；".join(evidence) or "无", omitted=omitted_text, noise="；".join(noise)
    )
    return persona, "；".join(evidence)


def bundle_words(draft: ProductDraft, axis: str, value: str) -> str:
    """A bundle value as a preference or search names it: ``带充电器和收纳包`` (its parts beyond those every value
    of the axis shares), ``单主机`` for the base alone; never the request's sentence (要带…的那套)."""
    entries = [str(e["value"]) for e in draft.record["customization_options"].get(axis, [])]
    common = set.intersection(*(set(parts_of(v)) for v in entries)) if entries else set()
    extras = [part for part in parts_of(value) if part not in common]
    if not extras:
        return value
    return "带" + (extras[0] if len(extras) == 1 else "、".join(extras[:-1]) + "和" + extras[-1])


def distractor_values(draft: ProductDraft, req: Requirements) -> list[str]:
    """Attribute values a persona may like without needing them: any value of a slot that holds no required
    attribute (so none competes with the goal), whether the gold has it or not, so the gold holds a preference
    word about as often as a random listing of its leaf."""
    wanted = set(req.attributes)
    return [value for slot in draft.leaf.slots if not wanted & set(slot.values) for value in slot.values]


def _size_field(
    draft: ProductDraft, req: Requirements, prefs: dict[str, Any], fields: list[str], rng: random.Random
) -> list[str]:
    """The size field is filled where the leaf has sizes (a shopper's usual size, the goal's when the task asks
    for one), left empty elsewhere."""
    sizes = [axis for axis in draft.leaf.axes if axis.name in ("尺码", "鞋码", "参考身高")]
    if not sizes:
        field = pick(rng, fields)
        if field not in prefs and rng.random() < 0.6:
            prefs[field] = "" if rng.random() < 0.5 else []
            return ["尺码类字段为空"]
        return []
    axis = sizes[0]
    field = "鞋码" if axis.name == "鞋码" else "尺码"
    if field in prefs:
        return []
    wanted = dict(req.options).get(axis.name)
    if wanted is not None:
        prefs[field] = [plain_value(draft, wanted)]
        return []
    prefs[field] = [pick(rng, axis.values)]
    return [f"{field}是用户常穿的尺码"]
