"""The former home of the FTS5 index (build, checks, backend choice, connections, queries), kept as an import path.

The implementation now lives in one private module per job (``_schema``, ``_build``, ``_manifest``,
``_backend``, ``_pool``, ``_index``); import the public names from ``shopsimrl.search``. The names below are
re-exported so that code written against ``shopsimrl.search.index`` keeps working.
"""

from ._backend import BACKEND_ENV as BACKEND_ENV
from ._backend import STORED_VERIFY_QUERIES as STORED_VERIFY_QUERIES
from ._backend import VERIFY_QUERIES as VERIFY_QUERIES
from ._build import build_search_index as build_search_index
from ._index import DEFAULT_CACHE_SIZE as DEFAULT_CACHE_SIZE
from ._index import SearchHit as SearchHit
from ._index import SearchIndex as SearchIndex
from ._schema import CREATE_PRODUCTS_SQL as CREATE_PRODUCTS_SQL
from ._schema import DEFAULT_FIELD_WEIGHTS as DEFAULT_FIELD_WEIGHTS
from ._schema import FTS_COLUMNS as FTS_COLUMNS
from ._schema import TOKENIZE as TOKENIZE
from ._schema import bm25_column_weights as bm25_column_weights
from ._schema import match_expression as match_expression
from ._schema import rebuild_hint as rebuild_hint
