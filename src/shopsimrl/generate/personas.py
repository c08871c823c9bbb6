"""Shopper personas and the short persona-mode request (``instruction_simple``).

A persona task hides one or more requirements of the full instruction from the short request and puts
evidence for each of them into the persona (attribute preferences, recent searches), next to realistic
noise: an unrelated brand preference, empty size fields, unrelated searches, a distracting attribute.
Users can own several tasks; their stable fields (id, demographics, region, trading habits, tags) are
shared, so the persona split links those tasks into one group.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from .budgets import weighted_choice
from .decidable import task_problems
from .evidence import build_persona
from .instructions import Requirements, join_attributes, option_phrase, tidy
from .option_prices import is_quantity
from .phrasing import Phrasing, pick_form
from .products import ProductDraft, plain_value
from .rng import pick, pick_many
from .text_check import persona_text_problems
from .users import User
from .vocabulary import Vocabulary

SIMPLE_MIN_CHARS = 15
SIMPLE_MAX_CHARS = 40
OMIT_COUNT_WEIGHTS = ((0.55, 1), (0.37, 2), (0.08, 3))


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
    "low": ("{axis}要最小的那档", "{axis}要最小的那个", "{axis}选最小的那档就行"),
    "high": ("{axis}要最大的那档", "要最大的那个{axis}", "{axis}选最大的那档"),
    "low2": ("{axis}要小一点的那个", "两个{axis}里选小的那个", "{axis}要小一点的"),
    "high2": ("{axis}要大一点的那个", "要大一点的那个{axis}", "两个{axis}里选大的那个"),
}
_DESCRIBED_PRICE = {
    "low": ("要最便宜的那个{axis}", "{axis}选最便宜的那档就行", "{axis}要最便宜的那个"),
    "high": ("{axis}要最贵的那档", "要最贵的那个{axis}", "{axis}选最高配的那档"),
    "low2": ("要便宜点的那个{axis}", "两个{axis}里选便宜的那个", "{axis}要便宜点的那个"),
    "high2": ("{axis}要贵一点的那个", "要贵一点的那个{axis}", "两个{axis}里选贵的那个"),
}
"""Size words (小的, 大一点) describe an end only of an amount axis (规格 5斤/10斤); another ordered axis (单锅基础款 …
四锅豪华款) is described by price (最便宜的那个, 贵一点的那个); an unordered one (淡色款 / 亮色款) never."""


def _ordered_axis(draft: ProductDraft, axis: str, values: list[str]) -> str:
    """``amount``, ``price`` (an ordered axis of the leaf that is no amount) or ``""`` (unordered, or a bundle)."""
    if draft.extras.get("bundle_axis") == axis:
        return ""
    if is_quantity(values):
        return "amount"
    return "price" if any(a.name == axis and a.ordered for a in draft.leaf.axes) else ""


def _described_option(draft: ProductDraft, axis: str, value: str, vocab: Vocabulary, rng: random.Random) -> str:
    """The option as a shopper says it: on a priced ordered axis, half the end values are described, not copied."""
    values = [entry["value"] for entry in draft.record["customization_options"].get(axis, [])]
    if draft.price_axes and axis == draft.price_axes[0] and len(values) >= 2 and rng.random() < DESCRIBED_OPTION_SHARE:
        end = "low" if value == values[0] else "high" if value == values[-1] else ""
        prices = [entry.get("price") for entry in draft.record["customization_options"][axis]]
        kind = _ordered_axis(draft, axis, [plain_value(draft, v) for v in values])
        if end and kind and all(p is not None for p in prices) and prices == sorted(prices) and len(set(prices)) == len(prices):
            # of two values, "the bigger one" (大一点的那个) names the gold exactly
            table = _DESCRIBED if kind == "amount" else _DESCRIBED_PRICE
            return pick(rng, table[end + ("2" if len(values) == 2 else "")]).format(axis=axis)
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
    """What the decidability check still finds (empty for a task decidable from public information)."""
    phrasing: Phrasing | None = None
    broken: list[str] = field(default_factory=list)
    """Broken forms the text validator finds (``text_check``); a draw with none is always preferred."""


DECIDABLE_TRIES = 6
"""Persona draws tried per task until the decidability check passes (what fails after that is counted)."""


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

    The pair is checked with :func:`decidable.task_problems` (the reward's own matching) and drawn again
    until every scored requirement is decided by public evidence; ``PersonaTask.problems`` keeps what is left.
    """
    kept, omitted = _omitted_split(req, rng)
    hidden = [value for axis, value in omitted if not axis]
    if any(value in req.use for value in hidden):
        # the use scene (送礼用) must not say an omitted attribute (送礼): the short request takes another scene
        use = next((u for u in draft.leaf.uses if not any(value in u for value in hidden)), "")
        req = dataclasses.replace(req, use=use)
    with_budget = bool(req.budget.phrase)  # the request states its budget itself, never leaving it to a recent search
    best: PersonaTask | None = None
    for _ in range(DECIDABLE_TRIES):
        phrasing = Phrasing(held_out=user.held_out)
        task = _draw(draft, req, user, list(kept), list(omitted), with_budget, siblings, unrelated_nouns,
                     taken, normalize, vocab, rng, phrasing)
        if best is None or (len(task.broken), len(task.problems)) < (len(best.broken), len(best.problems)):
            best = task
        if not task.problems and not task.broken:
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
    return PersonaTask(simple, persona, omitted, problems, phrasing, persona_text_problems(simple, persona))
