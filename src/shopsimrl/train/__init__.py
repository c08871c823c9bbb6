"""Training integration: a trainer-agnostic rollout core, GRPO group logic, trainer adapters and SFT export.

Nothing here imports a trainer at import time; ``shopsimrl.train.trl``, ``.verl`` and ``.slime`` import
theirs when used and name the extra to install when it is missing.
"""

from ..errors import RolloutError
from .rollout import (
    ABORTED,
    COMPLETED,
    TRUNCATED,
    Generation,
    RolloutConfig,
    RolloutContext,
    Segment,
    Trajectory,
    run_rollout,
)

__all__ = [
    "ABORTED", "COMPLETED", "TRUNCATED", "Generation", "RolloutConfig", "RolloutContext", "RolloutError",
    "Segment", "Trajectory", "run_rollout",
]
