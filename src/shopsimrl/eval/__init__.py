"""Evaluation: plans and run directories, the concurrent runner, summaries, paired comparisons and reports."""

from .plan import EvalPlan, build_jobs, episode_seed
from .rundir import RunDir, RunDirError
from .summary import summarize

__all__ = ["EvalPlan", "RunDir", "RunDirError", "build_jobs", "episode_seed", "summarize"]
