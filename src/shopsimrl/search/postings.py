"""The former home of the in-memory postings, kept as an import path: the implementation is ``_postings``
(private; the index chooses and verifies it, see ``shopsimrl.search.SearchIndex.backend``)."""

from ._postings import K1 as K1
from ._postings import B as B
from ._postings import Postings as Postings
from ._postings import PostingsUnavailable as PostingsUnavailable
