"""FTS5's ``unicode61`` tokenizer (docs/contract.md#search-tokeniser) as the postings emulate it: which
characters make tokens.

Why a module: the query side (``_postings``: can a phrase be answered without SQLite?) and the build side
(``_postings_scan``: stored text into term ids) must both split text exactly as SQLite did; the tables live here once.
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache

import numpy as np

#: What unicode61 does with ASCII: lowercase letters and digits are token characters, every other ASCII
#: character (space, punctuation) separates tokens. Uppercase is folded, which we leave to SQLite.
ASCII_TOKEN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
ASCII_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
ASCII_SEPARATORS = {code: " " for code in range(128) if chr(code) not in ASCII_TOKEN | ASCII_UPPER}
#: Han ranges of the docs/contract.md#search-tokeniser tokenizer; which of their code points unicode61 treats as token characters
#: depends on the Unicode tables of the SQLite build, so it is asked once (``sqlite_han_token_chars``).
HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF))
#: True for the ASCII separators, indexed by code point (index 128 stands for every non-ASCII one: a token char).
SEPARATOR_TABLE = np.array([code in ASCII_SEPARATORS for code in range(129)], dtype=bool)


@lru_cache(maxsize=1)
def sqlite_han_token_chars() -> frozenset[str]:
    """The Han code points that unicode61 keeps as one-character tokens equal to themselves (asked of SQLite)."""
    chars = [chr(c) for low, high in HAN_RANGES for c in range(low, high + 1)]
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("CREATE VIRTUAL TABLE probe USING fts5(t, tokenize='unicode61 remove_diacritics 2')")
        connection.execute("CREATE VIRTUAL TABLE probe_v USING fts5vocab(probe, row)")
        connection.execute("INSERT INTO probe VALUES (?)", (" ".join(chars),))
        wanted = set(chars)
        # A character folded onto another would make that term's count 2 (or a term outside the input).
        return frozenset(term for term, cnt in connection.execute("SELECT term, cnt FROM probe_v") if cnt == 1 and term in wanted)
    finally:
        connection.close()
