"""The cues the budget parser (``parser``) reads around an amount: the words and patterns that say whether a money
mention is a currency amount, a range, a bound, an approximation, a per-unit or partial price, or an alternative
(docs/contract.md#budget-parser). Tables only; which cue wins is ``parser``'s rule.
"""

from __future__ import annotations

import re
from typing import Final

# Full-width ASCII and the ideographic space, mapped one character to one character so that
# positions (and hence evidence substrings) stay those of the original text.
WIDTH_MAP: Final = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

CLAUSE_BREAK: Final = re.compile(r"[,，。；;！!？?\n\r、]")
LEAD_WINDOW: Final = 16

CURRENCY: Final = re.compile(r"\s*(?:块钱|元钱|人民币|块|元|圆|rmb|RMB|yuan)(?![A-Za-z])")
NOT_CURRENCY_AFTER_YUAN: Final = re.compile(r"[素旦宵气宝件器首老朝代年月]")
CURRENCY_BEFORE: Final = re.compile(r"(?:[¥$]|rmb|RMB|CNY|人民币)\s*$")
APPROX_SUFFIX: Final = re.compile(r"多一点|多点|多|余|来(?=\s*(?:块|元))|几|把(?=\s*(?:块|元))")
RANGE_SEPARATOR: Final = re.compile(r"\s*(?:-|~|—|–|−|至|到|和|与)\s*")
PLUS: Final = re.compile(r"\s*\+")
PER_UNIT_AFTER: Final = re.compile(
    r"\s*(?:/\s*\S|每|一?(?:平方米|平方|平米|㎡|延米)|(?:定金|订金|押金|首付|尾款|余款|运费|邮费)"
    r"|一(?:公斤|千克|斤|克|吨|厘米|公分|米|尺|码|毫升|升|小时|天|晚|周|月|年))"
)
"""What makes an amount a per-unit or partial price when it follows it, right after the amount or after its
qualifiers (``五百元左右的定金``, ``80元左右一斤``, ``30元每米``)."""


def _words(text: str) -> list[str]:
    return text.split()


TAIL_WORDS: Final[dict[str, str]] = {
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
TAIL: Final = re.compile("|".join(sorted(map(re.escape, TAIL_WORDS), key=len, reverse=True)))
REVERSAL_AFTER: Final = re.compile(
    r"^[^，。；;！!？?,\n]{0,6}?(?:不考虑|不予考虑|不要|不买|不行|算了|免谈|不接受|接受不了|太贵|pass)"
)

FILLER_BEFORE: Final = (
    r"(?:在|是|为|了|于|要|到|给|个|的|就|有|只有|控制在|控制|卡在|卡|能|可以|接受|都|也|\s|[¥$]|人民币|"
    r"预算|价格|价位|价钱|售价|总价|花费|花|出|付|掏|用|买|卖)*"
)
PREWORD: Final = re.compile(
    r"(?:(?P<negated>(?:不|别|勿|没|莫|未)[^，。；;,0-9]{0,3}?(?:超过|超出|超|高于|高过|多于|大于|贵于))"
    r"|(?P<lower>(?:不|别)[^，。；;,0-9]{0,3}?(?:低于|少于|小于)|不止|至少|起码|最少|最低|超过|超出|高于|大于|多于|多过)"
    r"|(?P<upper>低于|小于|少于|不到|不足|最多|最高|最贵|顶多|至多|上限|封顶|只能给到|给到)"
    r"|(?P<approx>花个|大约|大概|约莫|约摸|(?<![简节制预契公条邀相婚赴失履隐合])约|差不多|差不离|接近|将近|估计|大致))"
    + FILLER_BEFORE
    + r"$"
)
PRICE_WORD: Final = re.compile(
    r"总预算|总花费|总费用|总共|一共|合计|预算|预期价格|心理价位|总价格|总价|价格|价位|价钱|售价|单价|标价|报价|要价|花费|费用|全款|成本|金额|租金"
    r"|开销|消费|价|费|花|钱|卖"
)
NON_TOTAL_BEFORE: Final = re.compile(
    r"每|单(?:价|个|只|支|件|瓶|块|包|盒|片|张|条|根|双|套|台|份|杯|袋|罐|颗|粒|本|把|米|斤|平)"
    r"|定金|订金|押金|首付|尾款|余款|月供|运费|邮费|月租|日租|周租|年租|年费|月费"
    r"|(?<![0-9零〇一二两三四五六七八九十百千万])一?(?:平方米|平方|平米|㎡)"
)
BALANCE_BEFORE: Final = re.compile(r"(?<![弥填])(?:补|补交|补缴|补付|补齐|补足|补上|补差价|补差额|补款)(?:了|个)?\s*$")
"""A balance payment right before the amount (``后续补170元``, ``再补差价50元``): part of a price, not a total."""
ALTERNATIVE_BETWEEN: Final = re.compile(r"或|要么|还是")
VAGUE_AMOUNT: Final = re.compile(r"几(?:十|百|千|万)*\s*(?:块钱|块|元)")
DIGIT_COUNT_PRICE: Final = re.compile(r"(?P<digits>个|两|三)位数(?:的)?(?:价格|价位|价钱|以内|元|块)")
DIGIT_COUNT_CEILING: Final = {"个": 9.0, "两": 99.0, "三": 999.0}
BOUNDARY: Final = re.compile(r"\s*(?:$|[，。；;！!？?,\n)）])")


EXPLICIT_CAP_REASONS: Final = frozenset({"upper-bound word", "bound word", "range upper end"})
