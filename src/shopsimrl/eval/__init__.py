"""Evaluation: plans and run directories, the concurrent runner, summaries, paired comparisons and reports."""

from ..errors import ConfigError
from .compare import compare_runs
from .plan import EvalPlan, build_jobs, episode_seed
from .rundir import RunDir
from .runner import EvalResult, EvalSettings, evaluate, evaluate_async
from .summary import summarize

__all__ = [
    "ConfigError",
    "EvalPlan",
    "EvalResult",
    "EvalSettings",
    "RunDir",
    "build_jobs",
    "compare_runs",
    "episode_seed",
    "evaluate",
    "evaluate_async",
    "summarize",
]
