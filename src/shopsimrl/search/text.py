"""Query normaliser (``nfkc-casefold-basic-punctuation-v1``) and tokenizer (``han-bigram-latin-number-v1``).

Both are part of the ranking contract (docs/contract.md#search-normaliser, #search-tokeniser): the same text must give the same tokens as the
reference, so that the same catalog ranks the same way. The steps are therefore replicated literally, in the
reference's order, including two corner cases where normalising twice is not a no-op (see ``normalize_query``).
"""

from __future__ import annotations

import re
import unicodedata

#: The Latin/number token shape of docs/contract.md#search-tokeniser, shared by the tokenizer, the ``model`` field and the reward.
LATIN_TOKEN_PATTERN = r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*"
LATIN_TOKEN = re.compile(LATIN_TOKEN_PATTERN)
#: Han ranges of docs/contract.md#search-tokeniser: CJK Extension A and the CJK Unified Ideographs block.
HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
#: Characters that step 5 of docs/contract.md#search-normaliser turns into a space (full-width forms are already ASCII after NFKC).
PUNCTUATION_CHARS = "，,。；;：:！!？?、|"

_CURRENCY_WORD = re.compile(r"(?<=\d)\s*(?:rmb|cny|yuan)\b")
_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION = re.compile("[" + re.escape(PUNCTUATION_CHARS) + "]+")


def normalize_query(text: object) -> str:
    """Normalise like the reference: NFKC, casefold, currency words to ``元``, punctuation and spaces collapsed.

    The currency rule runs before punctuation becomes a space, so ``"1,rmb"`` gives ``"1 rmb"`` (and only a
    second pass would give ``"1元"``); casefold can also leave text that NFKC would recompose (``"ß\\u0301"``).
    Both are the reference's behaviour and are kept for ranking compatibility.
    """
    value = "" if text is None else str(text)
    value = unicodedata.normalize("NFKC", value).casefold()
    value = value.replace("人民币", "元").replace("块钱", "元")
    value = _CURRENCY_WORD.sub("元", value)
    value = _WHITESPACE.sub(" ", value)
    value = _PUNCTUATION.sub(" ", value)
    return " ".join(value.split())


def tokens_of_normalized(normalized: str) -> tuple[str, ...]:
    """Tokens of already-normalised text: all Han unigrams/bigrams first, then the Latin/number tokens."""
    tokens: list[str] = []
    for run in HAN_RUN.findall(normalized):
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
    tokens.extend(LATIN_TOKEN.findall(normalized))
    return tuple(dict.fromkeys(token for token in tokens if token))


def search_tokens(text: object) -> tuple[str, ...]:
    """The docs/contract.md#search-tokeniser tokens of ``text`` (normalised first), unique, in first-occurrence order."""
    return tokens_of_normalized(normalize_query(text))
