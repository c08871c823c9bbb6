"""Product records for one leaf: near-identical items that differ in attributes, option availability and price.

Every item of a leaf shares the product noun and draws its attributes from the leaf's pool, so the title
alone rarely tells two items apart. Each item has at most one price-affecting option axis (docs/contract.md#price-axes) unless it
is one of the configured two-axis products that cleaning must exclude. On non-price axes every entry either
carries the same price or none, so the SKU price stays resolvable (docs/contract.md#variant-price).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from .bundles import draw_bundle
from .option_prices import amount_of, amounts_rise, axis_prices, is_quantity, quantity_prices, taobao_price
from .rng import pick, pick_many
from .seller_options import seller_values
from .vocabulary import DEFAULT_FACET, Axis, Leaf, Vocabulary

IMAGE_HOST = "https://img.shopsim.local"
_WINDOW_AXES = ("尺码", "鞋码", "参考身高")
COLOUR_PRICED_SHARE = 0.12
"""An unordered 颜色分类 axis carries different prices this rarely (real colour axes are price-neutral)."""
NEAR_MISS_SHARE = 0.25
"""Share of products listed as a near miss of the leaf's previous product: the same selling points except
one that the previous product's task requires (成犬 for 幼犬, or a missing 静音), so titles tie and only the
product page tells them apart (as a shop's own variants and its competitors' copies do on Taobao)."""
SIZE_PRICED_SHARE = 0.1
"""A size axis (尺码, 鞋码, 参考身高) carries different prices this rarely (real sizes are nearly always one price)."""


_REPEAT = re.compile(r"([\u4e00-\u9fff]{2,10}) ?\1")
_DOUBLE_HEADS = re.compile(r"(用|装|款|的|码|在|和|选)\1")


def no_repeats(text: str) -> str:
    """A title never says a word twice in a row (新款新款, 防胀气奶瓶防胀气奶瓶, 家用用) nor one phrase
    twice (适用卧室 … 适用卧室), which patterns and seller phrases could produce."""
    for _ in range(4):  # a removal can bring two copies together (商务衬衫商务衬衫商务): repeat until stable
        cleaned = _DOUBLE_HEADS.sub(r"\1", _REPEAT.sub(r"\1", text))
        if cleaned == text:
            break
        text = cleaned
    seen: set[str] = set()
    words: list[str] = []
    for word in text.split(" "):
        if word and word in seen:
            continue
        seen.add(word)
        words.append(word)
    return " ".join(words)


@dataclass(frozen=True, slots=True)
class Brand:
    name: str
    initials: str
    shop_name: str


@dataclass
class ProductDraft:
    """A generated product plus the private facts its instruction is built from."""

    record: dict[str, Any]
    leaf: Leaf
    brand: Brand
    gold: dict[str, str]
    price_axes: list[str]
    gold_price: float
    dearer_price: float | None
    two_axis: bool
    extras: dict[str, Any] = field(default_factory=dict)



def make_brands(vocab: Vocabulary, domain: str, count: int, rng: random.Random) -> list[Brand]:
    """Made-up but plausible brand names (two or three characters) with their shop names and code initials."""
    chars = vocab.brand_chars
    suffixes = vocab.text["shop_suffixes"]
    brands: list[Brand] = []
    seen: set[str] = set()
    while len(brands) < count:
        size = 3 if rng.random() < 0.2 else 2
        picked = pick_many(rng, chars, size)
        name = "".join(char for char, _ in picked)
        if name in seen:
            continue
        seen.add(name)
        initials = "".join(initial for _, initial in picked)
        shop = name + pick(rng, suffixes)
        brands.append(Brand(name, initials, shop))
    return brands


def _model_code(rng: random.Random) -> str:
    """A model code unrelated to the brand name (real codes are series letters and digits: KX-2208, T9 Pro)."""
    letters = "ABCDEFGHJKLMNPQRSTVWXYZ"
    head = "".join(pick(rng, letters) for _ in range(rng.randint(1, 3)))
    digits = str(rng.randint(1, 9999))
    style = rng.random()
    if style < 0.35:
        return f"{head}-{digits}"
    if style < 0.65:
        return f"{head}{digits}"
    if style < 0.85:
        return f"{head}{digits}{pick(rng, ('Pro', 'Max', 'Plus', 'S', 'Lite', 'II'))}"
    return f"{head}{digits}-{pick(rng, letters)}"


def _axis_values(axis: Axis, rng: random.Random) -> list[str]:
    values = list(axis.values)
    if len(values) <= 2:
        return values
    if axis.name in _WINDOW_AXES or (axis.ordered and len(values) > 4):
        width = rng.randint(2, min(len(values), 5))
        start = rng.randint(0, len(values) - width)
        return values[start : start + width]
    count = rng.randint(2, min(len(values), 4))
    keep = sorted(pick_many(rng, range(len(values)), count))
    return [values[i] for i in keep]



def _attributes(leaf: Leaf, rng: random.Random) -> list[str]:
    count = min(len(leaf.slots), rng.randint(3, 5))
    chosen = pick_many(rng, leaf.slots, count)
    return [pick(rng, slot.values) for slot in chosen]


def near_miss_attributes(
    leaf: Leaf, attributes: list[str], required: tuple[str, ...], rng: random.Random
) -> list[str] | None:
    """``attributes`` with one required attribute swapped for its exclusive sibling or for an unused slot's value."""
    if not required:
        return None
    target = pick(rng, list(required))
    slot = next((slot for slot in leaf.slots if target in slot.values), None)
    if slot is None:
        return None
    siblings = [value for value in slot.values if value != target]
    if not siblings:
        used = set(attributes)
        free = [s for s in leaf.slots if not used & set(s.values)]
        if not free:
            return None
        siblings = list(pick(rng, free).values)
    replacement = pick(rng, siblings)
    return [replacement if value == target else value for value in attributes]


def _title(
    leaf: Leaf, brand: Brand, attributes: list[str], code: str, vocab: Vocabulary, rng: random.Random
) -> tuple[str, str, str]:
    """The title, plus the use scene and synonym it mentions (instructions describe the same product)."""
    points = attributes[:]
    rng.shuffle(points)
    pattern = pick(rng, vocab.text["title_patterns"])
    synonyms = leaf.neutral_synonyms(attributes)
    slots = {
        "brand": brand.name,
        "mkt": pick(rng, vocab.text["marketing"]),
        "word": pick(rng, leaf.words),
        "sp1": points[0] if points else "",
        "sp2": points[1] if len(points) > 1 else "",
        "sp3": points[2] if len(points) > 2 and rng.random() < 0.7 else "",
        "noun": leaf.noun,
        "syn": pick(rng, synonyms) if synonyms and rng.random() < 0.6 else "",
        "code": (" " + code) if code else "",
        "use": pick(rng, leaf.uses_for(attributes)),
    }
    title = no_repeats(pattern.format(**slots))
    syn = slots["syn"] if "{syn}" in pattern else ""
    use = slots["use"] if "{use}" in pattern else pick(rng, leaf.uses_for(attributes))
    return " ".join(title.split()), use, syn


def _bullets(
    leaf: Leaf, attributes: list[str], options: dict[str, list[dict[str, Any]]], vocab: Vocabulary, rng: random.Random
) -> list[str]:
    text = vocab.text
    plain = [a for a in attributes if leaf.facet_of(a) == DEFAULT_FACET]
    bullets = [
        text["bullet_facet"].format(facet=leaf.facet_of(a), value=a)
        for a in attributes
        if leaf.facet_of(a) != DEFAULT_FACET
    ]
    if plain:
        shown = plain[: rng.randint(1, min(3, len(plain)))]
        bullets.append(text["bullet_points"].format(values="、".join(shown)))
    if rng.random() < 0.7:
        uses = leaf.uses_for(attributes)
        bullets.append(text["bullet_use"].format(use="、".join(pick_many(rng, uses, min(2, len(uses))))))
    if options and rng.random() < 0.4:
        axis = pick(rng, list(options))
        bullets.append(text["bullet_axis"].format(axis=axis, values="、".join(e["value"] for e in options[axis])))
    bullets.append(pick(rng, text["services"]))
    return bullets


def _axis_count(leaf: Leaf, rng: random.Random) -> int:
    roll = rng.random()
    wanted = 0 if roll < 0.07 else 1 if roll < 0.55 else 2
    return min(wanted, len(leaf.axes))


def _priced_axes(leaf: Leaf, two_axis: bool, vocab: Vocabulary, rng: random.Random) -> tuple[list[Axis], list[str], Any]:
    """The option axes, which of them carry prices, and the package-contents bundle axis (None without one)."""
    price_axes: list[str]
    if two_axis:
        axes = list(leaf.axes[:2])
        price_axes = [axis.name for axis in axes]
    else:
        count = _axis_count(leaf, rng)
        axes = [leaf.axes[i] for i in sorted(pick_many(rng, range(len(leaf.axes)), count))]
        price_axes = []
        quantity = [axis for axis in axes if is_quantity(axis.values) and axis.name not in _WINDOW_AXES]
        if quantity:  # an amount axis is always priced (one price for 1 kg and 20 kg is no listing)
            price_axes = [quantity[0].name]
            # a second amount axis would be listed at one price (500G/2T/4T all 1,599): one amount axis only
            axes = [axis for axis in axes if axis is quantity[0] or not is_quantity(axis.values)]
        elif axes and rng.random() < 0.82:
            # a size axis is priced rarely (real sizes are nearly always one price): prefer another axis
            ordered = [axis for axis in axes if axis.ordered and axis.name not in _WINDOW_AXES]
            chosen = ordered[0] if ordered else next((a for a in axes if a.name not in _WINDOW_AXES), axes[0])
            if chosen.name in _WINDOW_AXES and rng.random() >= SIZE_PRICED_SHARE:
                pass
            elif chosen.ordered or chosen.name != "颜色分类" or rng.random() < COLOUR_PRICED_SHARE:
                price_axes = [chosen.name]

    bundle = None if two_axis else draw_bundle(leaf.name, vocab.text, rng)
    if bundle is not None:  # a priced axis of package contents (主机＋充电器), described in requests
        others = [a for a in axes if a.name != bundle.name and not is_quantity(a.values)]  # amounts stay priced
        axes = [Axis(bundle.name, bundle.values, True), *others[:1]]
        price_axes = [bundle.name]
    return axes, price_axes, bundle


def _options(
    leaf: Leaf, asin: str, axes: list[Axis], price_axes: list[str], bundle: Any, attributes: list[str], base: float,
    two_axis: bool, vocab: Vocabulary, rng: random.Random,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[float]], dict[str, str]]:
    """The listed option entries per axis, the prices of the priced axes, and seller string → plain word."""
    options: dict[str, list[dict[str, Any]]] = {}
    priced: dict[str, list[float]] = {}
    spoken: dict[str, str] = {}
    conflicts: dict[str, list[str]] = vocab.text["option_conflicts"]
    banned = {value for attribute in attributes for value in conflicts.get(attribute, ())}
    for axis in axes:
        values = list(bundle.values) if bundle is not None and axis.name == bundle.name else _axis_values(axis, rng)
        if banned & set(values):  # no 单录款 on a 前后双录 recorder (attribute–option exclusivity)
            kept = [v for v in values if v not in banned]
            spare = [v for v in axis.values if v not in banned and v not in kept]
            topped = kept if len(kept) >= 2 else [v for v in axis.values if v in kept or v in spare[: 2 - len(kept)]]
            # a two-axis product (raw archive only) keeps two values per axis, or cleaning would not exclude it
            values = topped if len(topped) >= 2 or not two_axis else values
        if axis.name in price_axes:
            scale = base if axis.name == price_axes[0] else base * rng.uniform(0.05, 0.3)
            if is_quantity(values):
                prices = quantity_prices([amount_of(v) or 1.0 for v in values], scale, rng)
            else:
                prices = axis_prices(len(values), scale, axis.ordered or amounts_rise(values), rng)
                if bundle is not None and axis.name == bundle.name:  # more parts, dearer (rounding kept no order)
                    prices = list(accumulate(prices, lambda a, b: b if b > a else round(a + max(1.0, a * 0.05), 2)))
            if axis.name != price_axes[0]:
                prices = [round(p, 2) for p in prices]
            priced[axis.name] = prices
        if bundle is not None and axis.name == bundle.name:
            shown = values
            spoken.update(zip(bundle.values, bundle.spoken, strict=True))
        else:
            shown = seller_values(axis.name, values, vocab, rng, leaf.domain, leaf.foreign)
        spoken.update((seller, plain) for seller, plain in zip(shown, values, strict=True) if seller != plain)
        entries: list[dict[str, Any]] = [{"value": value} for value in shown]
        if axis.name in priced:
            for entry, price in zip(entries, priced[axis.name], strict=True):
                entry["price"] = price
        with_images = axis.name == "颜色分类" and rng.random() < 0.7
        if with_images:
            for position, entry in enumerate(entries):
                entry["image"] = f"{IMAGE_HOST}/{asin}/sku/{len(options)}-{position}.jpg"
        options[axis.name] = entries
    return options, priced, spoken


def _gold(
    options: dict[str, list[dict[str, Any]]], priced: dict[str, list[float]], price_axes: list[str], base: float,
    rng: random.Random,
) -> tuple[dict[str, str], float, float | None, list[float]]:
    """Prices for the unpriced axes, then the task's gold values, its price, the next dearer price and ``pricing``."""
    if price_axes:
        main = price_axes[0]
        constant = min(priced[main])
    else:
        constant = taobao_price(base, rng)
    first_unpriced = True
    for axis_name, entries in options.items():
        if axis_name in priced:
            continue
        if (not price_axes and first_unpriced) or rng.random() < 0.5:
            for entry in entries:
                entry["price"] = constant
        first_unpriced = False

    gold: dict[str, str] = {}
    gold_price = constant
    dearer: float | None = None
    for axis_name, entries in options.items():
        if axis_name in price_axes and axis_name == price_axes[0]:
            prices = priced[axis_name]
            index = rng.randrange(len(prices))  # any value, so the gold price tells nothing
            gold[axis_name] = entries[index]["value"]
            gold_price = prices[index]
            above = [p for p in prices if p > gold_price]
            dearer = min(above) if above else None
        else:
            gold[axis_name] = pick(rng, entries)["value"]

    if price_axes:
        main_prices = priced[price_axes[0]]
        pricing = [min(main_prices), max(main_prices)]
    else:
        pricing = [constant]
    return gold, gold_price, dearer, pricing


def make_product(
    leaf: Leaf,
    asin: str,
    brand: Brand,
    two_axis: bool,
    vocab: Vocabulary,
    rng: random.Random,
    near: tuple[list[str], tuple[str, ...]] | None = None,
) -> ProductDraft:
    """One product of ``leaf``; ``two_axis`` products get two price-affecting axes (cleaning excludes them).

    ``near`` is the leaf's previous product (its attributes, the attributes its task requires): in a share of
    products this one copies them but one (a near miss, :data:`NEAR_MISS_SHARE`).
    """
    attributes = _attributes(leaf, rng)
    if near is not None and rng.random() < NEAR_MISS_SHARE:
        attributes = near_miss_attributes(leaf, near[0], near[1], rng) or attributes
    code = _model_code(rng) if leaf.has_model_code else ""
    low, high = leaf.price_range
    base = math.exp(rng.uniform(math.log(low), math.log(high)))
    axes, price_axes, bundle = _priced_axes(leaf, two_axis, vocab, rng)
    options, priced, spoken = _options(leaf, asin, axes, price_axes, bundle, attributes, base, two_axis, vocab, rng)
    gold, gold_price, dearer, pricing = _gold(options, priced, price_axes, base, rng)

    title, use, syn = _title(leaf, brand, attributes, code, vocab, rng)
    images = [f"{IMAGE_HOST}/{asin}/{i}.jpg" for i in range(rng.randint(1, 5))]
    record: dict[str, Any] = {
        "asin": asin,
        "title": title,
        "shop_name": brand.shop_name,
        "category": leaf.category,
        "product_category": leaf.name,
        "pricing": pricing,
        "customization_options": options,
        "attribute": attributes,
        "full_description": title,
        "small_description": _bullets(leaf, attributes, options, vocab, rng),
        "images": images,
        "reason_key": None,
    }
    draft = ProductDraft(record, leaf, brand, gold, price_axes, gold_price, dearer, two_axis)
    draft.extras.update(use=use, synonym=syn, spoken=spoken, bundle_axis=bundle.name if bundle is not None else "")
    return draft


def plain_value(draft: ProductDraft, value: str) -> str:
    """The plain word a shopper uses for an option value (``5斤`` for the seller string ``5斤装 新米``)."""
    spoken: dict[str, str] = draft.extras.get("spoken") or {}
    return spoken.get(value, value)
