"""The frozen catalog: reading and validating an archive, preparing a data directory, and opening it.

``prepare_dataset`` turns a ShopSimulator archive into a data directory (cleaned tasks, splits, budgets, the search
index, the stored page data); ``Catalog`` opens one by reading, after checking it against its manifest.
"""

from .archive import load_archive
from .prepare import PrepareOptions, prepare_dataset
from .record_checks import validate_records
from .records import Product
from .retrieval import evaluate_split
from .store import Catalog, check_data_dir

__all__ = [
    "Catalog",
    "PrepareOptions",
    "Product",
    "check_data_dir",
    "evaluate_split",
    "load_archive",
    "prepare_dataset",
    "validate_records",
]
