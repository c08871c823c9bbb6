"""Query normaliser (``nfkc-casefold-basic-punctuation-v1``) and tokenizer (``han-bigram-latin-number-v1``).

Both are part of the ranking contract (env_spec §3.1–3.2): the same text must give the same tokens as the
reference so that the same catalog ranks the same way.
"""

from __future__ import annotations

import re
import unicodedata

_CURRENCY_WORD = re.compile(r"(?<=\d)\s*(?:rmb|cny|yuan)\b")
_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION = re.compile(r"[，,。；;：:！!？?、|]+")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
LATIN_TOKEN = re.compile(r"[a-z0-9]+(?:[._+\-/][a-z0-9]+)*")


def normalize_query(text: object) -> str:
    value = "" if text is None else str(text)
    value = unicodedata.normalize("NFKC", value).casefold()
    value = value.replace("人民币", "元").replace("块钱", "元")
    value = _CURRENCY_WORD.sub("元", value)
    value = _WHITESPACE.sub(" ", value)
    value = _PUNCTUATION.sub(" ", value)
    return " ".join(value.split())


def tokens_of_normalized(normalized: str) -> tuple[str, ...]:
    """Tokens of text that is already normalised (Han unigrams/bigrams first, then Latin/number tokens)."""
    tokens: list[str] = []
    for run in _HAN_RUN.findall(normalized):
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
    tokens.extend(LATIN_TOKEN.findall(normalized))
    return tuple(dict.fromkeys(token for token in tokens if token))


def search_tokens(text: object) -> tuple[str, ...]:
    return tokens_of_normalized(normalize_query(text))
