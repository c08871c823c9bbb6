"""The index's frozen shape: FTS5 columns, tokenizer, field weights and the MATCH expression (docs/contract.md#search-ranking).

Why its own module: the builder writes this shape, the manifest checks compare a file against it and the
query path ranks with it; each of them imports it from here rather than from one another.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from .documents import FIELDS

FTS_COLUMNS: tuple[str, ...] = ("asin", *FIELDS)
#: The contract's field weights (docs/contract.md#search-ranking), read-only.
DEFAULT_FIELD_WEIGHTS: Mapping[str, float] = MappingProxyType({
    "title": 3.0, "brand": 2.0, "category": 2.0, "model": 2.5, "attributes": 1.5, "options": 1.2, "bullets": 0.8,
})
TOKENIZE = "unicode61 remove_diacritics 2"
CREATE_PRODUCTS_SQL = (
    "CREATE VIRTUAL TABLE products USING fts5("
    "asin UNINDEXED, title, brand, category, model, attributes, options, bullets, "
    f"tokenize='{TOKENIZE}')"
)


def weights_are_valid(field_weights: object) -> bool:
    """Exactly the 7 fields, each a finite positive number (docs/contract.md#search-index-manifest)."""
    return (
        isinstance(field_weights, Mapping)
        and set(field_weights) == set(FIELDS)
        and all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
            for w in field_weights.values()
        )
    )


def bm25_column_weights(field_weights: Mapping[str, float]) -> dict[str, float]:
    """Positional ``bm25()`` weights keyed by column, the UNINDEXED asin first with weight 0."""
    return {"asin": 0.0, **{name: float(field_weights[name]) for name in FIELDS}}


def bm25_call(field_weights: Mapping[str, float]) -> str:
    """The ``bm25(products, ...)`` SQL call with the column weights in FTS column order."""
    weights = bm25_column_weights(field_weights)
    return f"bm25(products, {', '.join(repr(weights[c]) for c in FTS_COLUMNS)})"


def match_expression(tokens: Iterable[str]) -> str:
    """The FTS5 query: every token as a quoted phrase, joined by OR (quotes doubled, as FTS5 escapes them)."""
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def rebuild_hint(path: Path) -> str:
    """The command that rebuilds the data directory holding the index ``path`` (appended to refusals)."""
    return f"rebuild it with `shopsimrl data prepare --archive ARCHIVE --out {path.parent} --force`"
