"""Rule-based budget (price ceiling) parser for instruction text (docs/contract.md#budget-parser, `instruction-budget-v1`).

The reference is a cascade of regexes that stops at the first hit; it misreads several phrase families
(docs/contract.md#deviations item 2). This parser instead finds every *money mention* in the text, classifies each one by the
words around it, and then picks one:

* a mention is an amount token (``numerals``) with an optional approximate suffix (``多``/``来``/``几``/
  ``余``), currency (``元``/``块``/``块钱``/``¥``…), a range end, and trailing qualifiers (``以内``,
  ``左右``, ``以上``, ``的预算``…); the *lead* is the text of the same clause just before it;
* its kind, in priority order: a per-unit or deposit price (``每平米``, ``单价``, ``定金``) or a balance
  payment (``补170元``, ``尾款800元``) is ``non_total_price``; a range gives its upper end (``hard_upper``, no tolerance, even with ``左右``);
  a lower bound (``以上``, ``至少``, ``超过``/``高于`` not negated, ``4k+``) is ``lower_only``; an upper-bound
  word right before the amount (``不超过``, ``别超``, ``最多``, ``低于``…) is ``hard_upper``; an approximate
  word anywhere in the mention (``左右``, ``上下``, ``大约``, ``大概``, ``约``, ``差不多``, ``出头``,
  ``多``, ``来``, ``附近``, ``接近``…) is ``approximate_upper``; anything else (``以内``, ``以下``, a plain
  ``预算是1000元``) is ``hard_upper``;
* the answer is the first *strong* upper mention (one with a price word, a bound or approximation word,
  or a range), else the first currency-only one; two different upper mentions offered as alternatives
  (``100元以内或300元左右``) are ``ambiguous``. With no upper mention the kind of the first other mention
  is reported (non-total, lower-only, ambiguous), else ``no_budget``.

Approximate budgets get the ×1.10 tolerance once, rounded to 8 decimals like the annotations
(docs/contract.md#budget-annotations): ``round(amount * 1.1, 8)``. Only ``price_upper`` matters to the reward; the other fields are for
auditing why a text got its ceiling. The word and pattern tables are ``cues``; this module is the rules.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Final, Literal

from shopsimrl.budget.cues import (
    ALTERNATIVE_BETWEEN,
    APPROX_SUFFIX,
    BALANCE_BEFORE,
    BOUNDARY,
    CLAUSE_BREAK,
    CURRENCY,
    CURRENCY_BEFORE,
    DIGIT_COUNT_CEILING,
    DIGIT_COUNT_PRICE,
    EXPLICIT_CAP_REASONS,
    LEAD_WINDOW,
    NON_TOTAL_BEFORE,
    NOT_CURRENCY_AFTER_YUAN,
    PER_UNIT_AFTER,
    PLUS,
    PREWORD,
    PRICE_WORD,
    RANGE_SEPARATOR,
    REVERSAL_AFTER,
    TAIL,
    TAIL_WORDS,
    VAGUE_AMOUNT,
    WIDTH_MAP,
)
from shopsimrl.budget.numerals import AMOUNT_TOKEN, longest_numeral, split_digit_pair

BudgetKind = Literal[
    "hard_upper", "approximate_upper", "lower_only", "non_total_price", "ambiguous", "no_budget"
]
UPPER_KINDS: Final = frozenset({"hard_upper", "approximate_upper"})
APPROXIMATE_MULTIPLIER: Final = 1.1

@dataclass(frozen=True)
class BudgetParse:
    """Why a text has the ceiling it has.

    ``amount`` is the number the text states (the range's upper end for a range) and ``price_upper`` the
    ceiling the reward uses: the amount for ``hard_upper``, ``round(amount * 1.1, 8)`` for
    ``approximate_upper`` and None for every other kind. ``evidence`` is the verbatim substring the
    decision rests on ("" for ``no_budget``) and ``reason`` names the rule that fired.
    """

    kind: BudgetKind
    amount: float | None
    price_upper: float | None
    evidence: str
    reason: str = ""


@dataclass
class _Mention:
    kind: BudgetKind
    amount: float | None
    start: int
    end: int
    strong: bool
    reason: str
    price_upper: float | None = field(init=False)

    def __post_init__(self) -> None:
        self.price_upper = _ceiling(self.kind, self.amount)


def _ceiling(kind: BudgetKind, amount: float | None) -> float | None:
    if amount is None or kind not in UPPER_KINDS:
        return None
    if kind == "approximate_upper":
        return round(amount * APPROXIMATE_MULTIPLIER, 8)
    return amount


def parse_budget(text: str | None) -> float | None:
    """The price ceiling stated in ``text``, or None when it states no usable total upper bound."""
    detail = parse_budget_detail(text)
    return None if detail is None else detail.price_upper


def parse_budget_detail(text: str | None) -> BudgetParse | None:
    """Classify the budget in ``text``; None only when ``text`` is None."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"budget text must be str or None, not {type(text).__name__}")
    norm = text.translate(WIDTH_MAP)
    mentions = _scan(norm)
    chosen = _choose(norm, mentions)
    if chosen is None:
        return BudgetParse("no_budget", None, None, "", "no money mention")
    if chosen.kind == "ambiguous" and chosen.reason == "alternatives":
        return BudgetParse("ambiguous", None, None, text[chosen.start : chosen.end], chosen.reason)
    return BudgetParse(
        chosen.kind,
        chosen.amount if chosen.kind in UPPER_KINDS else None,
        chosen.price_upper,
        text[chosen.start : chosen.end],
        chosen.reason,
    )


def _choose(norm: str, mentions: list[_Mention]) -> _Mention | None:
    uppers = [m for m in mentions if m.kind in UPPER_KINDS]
    if uppers:
        strong = [m for m in uppers if m.strong] or uppers
        chosen = next((m for m in strong if m.reason in EXPLICIT_CAP_REASONS), strong[0])
        # where the alternative words are, found once: a search per pair of mentions would be quadratic
        alternatives = [(m.start(), m.end()) for m in ALTERNATIVE_BETWEEN.finditer(norm)]
        starts = [start for start, _ in alternatives]
        for other in uppers:
            if other is chosen or other.price_upper == chosen.price_upper:
                continue
            first, second = (chosen, other) if chosen.start < other.start else (other, chosen)
            at = bisect_left(starts, first.end)
            if at < len(alternatives) and alternatives[at][1] <= second.start:
                return _Mention("ambiguous", None, first.start, second.end, True, "alternatives")
        return chosen
    for kind in ("non_total_price", "lower_only", "ambiguous"):
        found = next((m for m in mentions if m.kind == kind), None)
        if found is not None:
            return found
    return None


def _clause_start(norm: str, pos: int, floor: int) -> int:
    start = max(floor, pos - LEAD_WINDOW, 0)
    breaks = [m.end() for m in CLAUSE_BREAK.finditer(norm, start, pos)]
    return breaks[-1] if breaks else start


def _scan(norm: str) -> list[_Mention]:
    mentions: list[_Mention] = []
    pos = 0
    while (match := AMOUNT_TOKEN.search(norm, pos)) is not None:
        mention, pos = _read_mention(norm, match, mentions[-1].end if mentions else 0)
        if mention is not None:
            mentions.append(mention)
    starts = [m.start for m in mentions]  # in scan order: increasing and not overlapping
    for match in VAGUE_AMOUNT.finditer(norm):
        at = bisect_right(starts, match.start()) - 1  # the last mention starting at or before it
        if at < 0 or mentions[at].end <= match.start():
            mentions.append(_Mention("ambiguous", None, match.start(), match.end(), False, "vague amount"))
    for match in DIGIT_COUNT_PRICE.finditer(norm):
        amount = DIGIT_COUNT_CEILING[match.group("digits")]
        mentions.append(_Mention("hard_upper", amount, match.start(), match.end(), True, "digit count"))
    mentions.sort(key=lambda m: m.start)
    return mentions


@dataclass
class _Amount:
    literal: str
    value: float
    head_end: int
    end: int
    approximate: bool
    currency: str
    lower_plus: bool
    suffixed: bool = False  # an approximate suffix (几/多/来...), which only follows a number


def _read_amount(norm: str, match: re.Match[str]) -> _Amount | None:
    """Amount token, approximate suffix and currency at ``match``; None when it is not a numeral."""
    start = match.start()
    before = norm[start - 1] if start > 0 else ""
    currency_before = CURRENCY_BEFORE.search(norm[max(0, start - 8) : start]) is not None
    if before == "第" or (before.isascii() and before.isalpha() and not currency_before):
        return None  # ordinals and model numbers ("第三", "i7", "iPhone15")
    token, pair = split_digit_pair(match.group())
    found = longest_numeral(token)
    if found is None:
        return None
    value, head = found
    head_end = end = match.end() - len(token) + len(head)
    approximate = pair
    suffix = APPROX_SUFFIX.match(norm, end)
    suffixed = suffix is not None
    if suffix:
        approximate = True
        end = suffix.end()
    currency = ""
    cur = CURRENCY.match(norm, end)
    if cur and not (cur.group().strip() == "元" and NOT_CURRENCY_AFTER_YUAN.match(norm, cur.end())):
        currency = cur.group().strip()
        end = cur.end()
        late = None if approximate else APPROX_SUFFIX.match(norm, end)
        if late and late.group() in ("多", "多点", "多一点"):  # "100元多"
            approximate = suffixed = True
            end = late.end()
    elif currency_before:
        currency = "prefix"
    plus = PLUS.match(norm, end)
    if plus:
        end = plus.end()
    literal = norm[start:end]
    return _Amount(literal, round(value, 8), head_end, end, approximate, currency, plus is not None, suffixed)


def _read_tail(norm: str, pos: int) -> tuple[set[str], int, int]:
    """Qualifier words after an amount: their categories, where the last meaningful one ends, and
    where the fillers after it end."""
    categories: set[str] = set()
    end = pos
    for _ in range(8):
        word = TAIL.match(norm, pos)
        if word is None:
            break
        pos = word.end()
        category = TAIL_WORDS[word.group()]
        if category != "filler":
            categories.add(category)
            end = pos
    return categories, end, pos


def _read_range_end(norm: str, low: _Amount) -> _Amount | None:
    """The upper end of a range starting at ``low`` ("130-140元", "350元和400元之间", "1万到1.1万")."""
    separator = RANGE_SEPARATOR.match(norm, low.end)
    if separator is None or low.lower_plus:
        return None
    token = AMOUNT_TOKEN.match(norm, separator.end())
    high = _read_amount(norm, token) if token else None
    if high is None or low.value <= 0:
        return None
    if not (low.currency or high.currency):
        tail, _, after = _read_tail(norm, high.end)
        if not (tail or BOUNDARY.match(norm, after)):
            return None  # "1-2周": a range of something else
    return high


def _is_money(
    amount: _Amount,
    token: str,
    *,
    context: bool,
    has_preword: bool,
    has_price_word: bool,
    tail: set[str],
    is_range: bool,
    at_boundary: bool,
    next_char: str,
) -> bool:
    """Whether an amount is a price rather than a size, count, date or model number."""
    if not amount.currency:
        if len(token) == 1 and not has_preword:
            return False  # "价格统一", "价格十分实惠"
        if any(ch in "wW" for ch in token) and not has_price_word:
            return False  # "100W" is watts
        return bool(tail - {"noun"} or is_range or (context and (tail or at_boundary)))
    # "一块儿", "两块香皂": 块 as a classifier, not money; "三十几块的那种" and "30块的" are money
    classifier = amount.currency == "块" and not (tail or context or amount.suffixed) and next_char != "的"
    return not (classifier and "\u4e00" <= next_char <= "\u9fff")


def _read_mention(norm: str, match: re.Match[str], previous_end: int) -> tuple[_Mention | None, int]:
    """The money mention at an amount token (None if it is not one) and where scanning resumes."""
    amount = _read_amount(norm, match)
    if amount is None:
        return None, match.end()
    start = match.start()
    lead_start = _clause_start(norm, start, previous_end)
    lead = norm[lead_start:start]
    preword = PREWORD.search(lead)
    pre_kind = preword.lastgroup if preword else None
    price_word = PRICE_WORD.search(lead)
    high = _read_range_end(norm, amount)
    value, end = (max(amount.value, high.value), high.end) if high else (amount.value, amount.end)
    per_unit = PER_UNIT_AFTER.match(norm, end)
    if per_unit:
        end = per_unit.end()
    tail, tail_end, after_fillers = _read_tail(norm, end)
    end = max(end, tail_end)
    if per_unit is None and (per_unit := PER_UNIT_AFTER.match(norm, after_fillers)):
        end = per_unit.end()  # "五百元左右的定金", "300元的订金", "80元左右一斤": after qualifiers/fillers
    priced = amount if high is None or amount.currency else high
    if not _is_money(
        priced,
        amount.literal if high is None else match.group(),
        context=price_word is not None or pre_kind is not None or "noun" in tail,
        has_preword=pre_kind is not None,
        has_price_word=price_word is not None,
        tail=tail,
        is_range=high is not None,
        at_boundary=BOUNDARY.match(norm, after_fillers) is not None,
        next_char=norm[end : end + 1],
    ):
        return None, amount.head_end
    strong = bool(tail or high or pre_kind or price_word or amount.approximate)
    anchors = [lead_start + m.start() for m in (preword, price_word) if m is not None]
    evidence_start = min([start, *anchors])
    if start > 0 and norm[start - 1] in "¥$" and evidence_start == start:
        evidence_start = start - 1
    non_total = NON_TOTAL_BEFORE.search(lead) or BALANCE_BEFORE.search(lead)
    if non_total is not None:
        evidence_start = min(evidence_start, lead_start + non_total.start())

    def made(kind: BudgetKind, reason: str) -> tuple[_Mention, int]:
        mention = _Mention(kind, value if kind in UPPER_KINDS else None, evidence_start, end, strong, reason)
        return mention, end

    if value <= 0:
        return made("ambiguous", "zero amount")
    if per_unit or non_total:
        return made("non_total_price", "per-unit or deposit price")
    refused = REVERSAL_AFTER.match(norm[end : end + 12]) is not None
    if high is not None:
        if "lower" in tail and not refused:
            return made("lower_only", "range with lower-bound tail")
        return made("hard_upper", "range upper end")
    if start > 0 and norm[start - 1] == "几":
        return made("ambiguous", "vague amount")
    if amount.lower_plus or "lower" in tail or pre_kind == "lower":
        return made("hard_upper", "exceeding is refused") if refused else made("lower_only", "lower bound")
    if pre_kind in ("negated", "upper"):
        return made("hard_upper", "upper-bound word")
    if amount.approximate or pre_kind == "approx" or "approx" in tail:
        return made("approximate_upper", "approximate word")
    return made("hard_upper", "bound word" if "hard" in tail else "stated amount")
