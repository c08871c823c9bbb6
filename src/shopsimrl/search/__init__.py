"""Search: the query normaliser and tokenizer, per-field documents, the FTS5 BM25 index and retrieval evaluation."""

from .documents import product_search_fields
from .evaluate import RetrievalQuery, evaluate_retrieval
from .index import DEFAULT_FIELD_WEIGHTS, FTS_COLUMNS, SearchHit, SearchIndex, build_search_index
from .text import normalize_query, search_tokens

__all__ = [
    "DEFAULT_FIELD_WEIGHTS",
    "FTS_COLUMNS",
    "RetrievalQuery",
    "SearchHit",
    "SearchIndex",
    "build_search_index",
    "evaluate_retrieval",
    "normalize_query",
    "product_search_fields",
    "search_tokens",
]
