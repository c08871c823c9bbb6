"""Search: the query normaliser and tokenizer, per-field documents, the FTS5 BM25 index and retrieval evaluation.

``__all__`` is the public surface. The index is implemented in private modules, one per job: ``_schema``
(columns, tokenizer, weights, MATCH expression), ``_build`` (atomic build), ``_manifest`` (open-time checks),
``_backend`` (the in-memory postings of ``_postings``, verified against SQLite; their query phrases ``_phrases``,
the tokenizer tables ``_unicode61``, their build ``_postings_build`` over the ``_postings_scan`` pass), ``_pool``
(read-only connections), ``_ranking`` (one cached query's results) and ``_index`` (``SearchIndex``: open and cached
queries). ``search.stored`` is the on-disk form that ``catalog`` writes and opens.
"""

from ._backend import BACKEND_ENV
from ._build import build_search_index
from ._index import DEFAULT_CACHE_SIZE, SearchIndex
from ._ranking import SearchHit
from ._schema import DEFAULT_FIELD_WEIGHTS, FTS_COLUMNS, match_expression
from .documents import product_search_fields
from .evaluate import RetrievalQuery, evaluate_retrieval
from .text import normalize_query, search_tokens

__all__ = [
    "BACKEND_ENV",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_FIELD_WEIGHTS",
    "FTS_COLUMNS",
    "RetrievalQuery",
    "SearchHit",
    "SearchIndex",
    "build_search_index",
    "evaluate_retrieval",
    "match_expression",
    "normalize_query",
    "product_search_fields",
    "search_tokens",
]
