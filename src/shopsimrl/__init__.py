"""ShopSimRL: a deterministic local simulator for training and evaluating LLM shopping agents.

The public API is small: open a prepared data directory as a ``ShopEnv``, ``reset`` a task and ``step``
canonical actions; ``score_purchase`` scores a purchase offline; ``parse_budget`` reads a price ceiling.
"""

from .budget import parse_budget
from .env import ShopEnv, ShopWorld, score_purchase
from .errors import (
    ArchiveError,
    DatasetBuildError,
    DialogueError,
    EpisodeTerminatedError,
    ObservationError,
    PersonaUnavailableError,
    SearchIndexError,
    ShopSimError,
    SplitError,
    UnknownTaskError,
)

__version__ = "0.1.0"

__all__ = [
    "ArchiveError",
    "DatasetBuildError",
    "DialogueError",
    "EpisodeTerminatedError",
    "ObservationError",
    "PersonaUnavailableError",
    "SearchIndexError",
    "ShopEnv",
    "ShopSimError",
    "ShopWorld",
    "SplitError",
    "UnknownTaskError",
    "__version__",
    "parse_budget",
    "score_purchase",
]
