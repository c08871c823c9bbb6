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
auditing why a text got its ceiling.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Final, Literal

from shopsimrl.budget.numerals import AMOUNT_TOKEN, longest_numeral, split_digit_pair

BudgetKind = Literal[
    "hard_upper", "approximate_upper", "lower_only", "non_total_price", "ambiguous", "no_budget"
]
UPPER_KINDS: Final = frozenset({"hard_upper", "approximate_upper"})
APPROXIMATE_MULTIPLIER: Final = 1.1

# Full-width ASCII and the ideographic space, mapped one character to one character so that
# positions (and hence evidence substrings) stay those of the original text.
_WIDTH_MAP: Final = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

_CLAUSE_BREAK: Final = re.compile(r"[,，。；;！!？?\n\r、]")
_LEAD_WINDOW: Final = 16

_CURRENCY: Final = re.compile(r"\s*(?:块钱|元钱|人民币|块|元|圆|rmb|RMB|yuan)(?![A-Za-z])")
_NOT_CURRENCY_AFTER_YUAN: Final = re.compile(r"[素旦宵气宝件器首老朝代年月]")
_CURRENCY_BEFORE: Final = re.compile(r"(?:[¥$]|rmb|RMB|CNY|人民币)\s*$")
_APPROX_SUFFIX: Final = re.compile(r"多一点|多点|多|余|来(?=\s*(?:块|元))|几|把(?=\s*(?:块|元))")
_RANGE_SEPARATOR: Final = re.compile(r"\s*(?:-|~|—|–|−|至|到|和|与)\s*")
_PLUS: Final = re.compile(r"\s*\+")
_PER_UNIT_AFTER: Final = re.compile(
    r"\s*(?:/\s*\S|每|一?(?:平方米|平方|平米|㎡|延米)|(?:定金|订金|押金|首付|尾款|余款|运费|邮费)"
    r"|一(?:公斤|千克|斤|克|吨|厘米|公分|米|尺|码|毫升|升|小时|天|晚|周|月|年))"
)
"""What makes an amount a per-unit or partial price when it follows it, right after the amount or after its
qualifiers (``五百元左右的定金``, ``80元左右一斤``, ``30元每米``)."""


def _words(text: str) -> list[str]:
    return text.split()


_TAIL_WORDS: Final[dict[str, str]] = {
    **dict.fromkeys(
        _words("上下浮动 上下波动 左右 上下 附近 出头 浮动 的样子 样子 大约 大概 光景"), "approx"
    ),
    **dict.fromkeys(
        _words(
            "以内 之内 以下 之下 以里 内 都不到 还不到 不到 封顶 为上限 为限 打住 就够 够了 足够 应该够 能拿下 拿下 "
            "能搞定 帮我搞定 搞定 基本能买到 能买到 买到 能买 来买 就行 就好 就可以 即可 可以"
        ),
        "hard",
    ),
    **dict.fromkeys(_words("以上 之上 起步 往上 开外 朝上 打底 起"), "lower"),
    **dict.fromkeys(_words("之间 中间 区间"), "between"),
    **dict.fromkeys(_words("的预算 预算 的价格 价格 的价位 价位 的价钱 价钱 的售价 这个价"), "noun"),
    **dict.fromkeys([" ", *_words("一点点 一点 的 以 吧 了 啊 呢 呀 哦 就 都 也")], "filler"),
}
"""Words that may follow an amount, by what they say about it; fillers are skipped over."""
_TAIL: Final = re.compile("|".join(sorted(map(re.escape, _TAIL_WORDS), key=len, reverse=True)))
_REVERSAL_AFTER: Final = re.compile(
    r"^[^，。；;！!？?,\n]{0,6}?(?:不考虑|不予考虑|不要|不买|不行|算了|免谈|不接受|接受不了|太贵|pass)"
)

_FILLER_BEFORE: Final = (
    r"(?:在|是|为|了|于|要|到|给|个|的|就|有|只有|控制在|控制|卡在|卡|能|可以|接受|都|也|\s|[¥$]|人民币|"
    r"预算|价格|价位|价钱|售价|总价|花费|花|出|付|掏|用|买|卖)*"
)
_PREWORD: Final = re.compile(
    r"(?:(?P<negated>(?:不|别|勿|没|莫|未)[^，。；;,0-9]{0,3}?(?:超过|超出|超|高于|高过|多于|大于|贵于))"
    r"|(?P<lower>(?:不|别)[^，。；;,0-9]{0,3}?(?:低于|少于|小于)|不止|至少|起码|最少|最低|超过|超出|高于|大于|多于|多过)"
    r"|(?P<upper>低于|小于|少于|不到|不足|最多|最高|最贵|顶多|至多|上限|封顶|只能给到|给到)"
    r"|(?P<approx>花个|大约|大概|约莫|约摸|(?<![简节制预契公条邀相婚赴失履隐合])约|差不多|差不离|接近|将近|估计|大致))"
    + _FILLER_BEFORE
    + r"$"
)
_PRICE_WORD: Final = re.compile(
    r"总预算|总花费|总费用|总共|一共|合计|预算|预期价格|心理价位|总价格|总价|价格|价位|价钱|售价|单价|标价|报价|要价|花费|费用|全款|成本|金额|租金"
    r"|开销|消费|价|费|花|钱|卖"
)
_NON_TOTAL_BEFORE: Final = re.compile(
    r"每|单(?:价|个|只|支|件|瓶|块|包|盒|片|张|条|根|双|套|台|份|杯|袋|罐|颗|粒|本|把|米|斤|平)"
    r"|定金|订金|押金|首付|尾款|余款|月供|运费|邮费|月租|日租|周租|年租|年费|月费"
    r"|(?<![0-9零〇一二两三四五六七八九十百千万])一?(?:平方米|平方|平米|㎡)"
)
_BALANCE_BEFORE: Final = re.compile(r"(?<![弥填])(?:补|补交|补缴|补付|补齐|补足|补上|补差价|补差额|补款)(?:了|个)?\s*$")
"""A balance payment right before the amount (``后续补170元``, ``再补差价50元``): part of a price, not a total."""
_ALTERNATIVE_BETWEEN: Final = re.compile(r"或|要么|还是")
_VAGUE_AMOUNT: Final = re.compile(r"几(?:十|百|千|万)*\s*(?:块钱|块|元)")
_DIGIT_COUNT_PRICE: Final = re.compile(r"(?P<digits>个|两|三)位数(?:的)?(?:价格|价位|价钱|以内|元|块)")
_DIGIT_COUNT_CEILING: Final = {"个": 9.0, "两": 99.0, "三": 999.0}
_BOUNDARY: Final = re.compile(r"\s*(?:$|[，。；;！!？?,\n)）])")


_EXPLICIT_CAP_REASONS: Final = frozenset({"upper-bound word", "bound word", "range upper end"})


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
    norm = text.translate(_WIDTH_MAP)
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
        chosen = next((m for m in strong if m.reason in _EXPLICIT_CAP_REASONS), strong[0])
        # where the alternative words are, found once: a search per pair of mentions would be quadratic
        alternatives = [(m.start(), m.end()) for m in _ALTERNATIVE_BETWEEN.finditer(norm)]
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
    start = max(floor, pos - _LEAD_WINDOW, 0)
    breaks = [m.end() for m in _CLAUSE_BREAK.finditer(norm, start, pos)]
    return breaks[-1] if breaks else start


def _scan(norm: str) -> list[_Mention]:
    mentions: list[_Mention] = []
    pos = 0
    while (match := AMOUNT_TOKEN.search(norm, pos)) is not None:
        mention, pos = _read_mention(norm, match, mentions[-1].end if mentions else 0)
        if mention is not None:
            mentions.append(mention)
    starts = [m.start for m in mentions]  # in scan order: increasing and not overlapping
    for match in _VAGUE_AMOUNT.finditer(norm):
        at = bisect_right(starts, match.start()) - 1  # the last mention starting at or before it
        if at < 0 or mentions[at].end <= match.start():
            mentions.append(_Mention("ambiguous", None, match.start(), match.end(), False, "vague amount"))
    for match in _DIGIT_COUNT_PRICE.finditer(norm):
        amount = _DIGIT_COUNT_CEILING[match.group("digits")]
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
    currency_before = _CURRENCY_BEFORE.search(norm[max(0, start - 8) : start]) is not None
    if before == "第" or (before.isascii() and before.isalpha() and not currency_before):
        return None  # ordinals and model numbers ("第三", "i7", "iPhone15")
    token, pair = split_digit_pair(match.group())
    found = longest_numeral(token)
    if found is None:
        return None
    value, head = found
    head_end = end = match.end() - len(token) + len(head)
    approximate = pair
    suffix = _APPROX_SUFFIX.match(norm, end)
    suffixed = suffix is not None
    if suffix:
        approximate = True
        end = suffix.end()
    currency = ""
    cur = _CURRENCY.match(norm, end)
    if cur and not (cur.group().strip() == "元" and _NOT_CURRENCY_AFTER_YUAN.match(norm, cur.end())):
        currency = cur.group().strip()
        end = cur.end()
        late = None if approximate else _APPROX_SUFFIX.match(norm, end)
        if late and late.group() in ("多", "多点", "多一点"):  # "100元多"
            approximate = suffixed = True
            end = late.end()
    elif currency_before:
        currency = "prefix"
    plus = _PLUS.match(norm, end)
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
        word = _TAIL.match(norm, pos)
        if word is None:
            break
        pos = word.end()
        category = _TAIL_WORDS[word.group()]
        if category != "filler":
            categories.add(category)
            end = pos
    return categories, end, pos


def _read_range_end(norm: str, low: _Amount) -> _Amount | None:
    """The upper end of a range starting at ``low`` ("130-140元", "350元和400元之间", "1万到1.1万")."""
    separator = _RANGE_SEPARATOR.match(norm, low.end)
    if separator is None or low.lower_plus:
        return None
    token = AMOUNT_TOKEN.match(norm, separator.end())
    high = _read_amount(norm, token) if token else None
    if high is None or low.value <= 0:
        return None
    if not (low.currency or high.currency):
        tail, _, after = _read_tail(norm, high.end)
        if not (tail or _BOUNDARY.match(norm, after)):
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
    preword = _PREWORD.search(lead)
    pre_kind = preword.lastgroup if preword else None
    price_word = _PRICE_WORD.search(lead)
    high = _read_range_end(norm, amount)
    value, end = (max(amount.value, high.value), high.end) if high else (amount.value, amount.end)
    per_unit = _PER_UNIT_AFTER.match(norm, end)
    if per_unit:
        end = per_unit.end()
    tail, tail_end, after_fillers = _read_tail(norm, end)
    end = max(end, tail_end)
    if per_unit is None and (per_unit := _PER_UNIT_AFTER.match(norm, after_fillers)):
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
        at_boundary=_BOUNDARY.match(norm, after_fillers) is not None,
        next_char=norm[end : end + 1],
    ):
        return None, amount.head_end
    strong = bool(tail or high or pre_kind or price_word or amount.approximate)
    anchors = [lead_start + m.start() for m in (preword, price_word) if m is not None]
    evidence_start = min([start, *anchors])
    if start > 0 and norm[start - 1] in "¥$" and evidence_start == start:
        evidence_start = start - 1
    non_total = _NON_TOTAL_BEFORE.search(lead) or _BALANCE_BEFORE.search(lead)
    if non_total is not None:
        evidence_start = min(evidence_start, lead_start + non_total.start())

    def made(kind: BudgetKind, reason: str) -> tuple[_Mention, int]:
        mention = _Mention(kind, value if kind in UPPER_KINDS else None, evidence_start, end, strong, reason)
        return mention, end

    if value <= 0:
        return made("ambiguous", "zero amount")
    if per_unit or non_total:
        return made("non_total_price", "per-unit or deposit price")
    refused = _REVERSAL_AFTER.match(norm[end : end + 12]) is not None
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
