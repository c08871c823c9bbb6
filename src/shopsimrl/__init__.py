"""ShopSimRL: a deterministic local simulator for training and evaluating LLM shopping agents.

The public API is small: open a prepared data directory as a ``ShopEnv``, ``reset`` a task and ``step``
canonical actions; ``score_purchase`` scores a purchase offline; ``parse_budget`` reads a price ceiling.
"""

from .budget import parse_budget
from .env import ShopEnv, ShopWorld, score_purchase
from .errors import DataError, EpisodeStateError, RequestError, ShopSimError

__version__ = "0.1.0"

__all__ = [
    "DataError",
    "EpisodeStateError",
    "RequestError",
    "ShopEnv",
    "ShopSimError",
    "ShopWorld",
    "__version__",
    "parse_budget",
    "score_purchase",
]
