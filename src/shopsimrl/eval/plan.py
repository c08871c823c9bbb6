"""What an evaluation runs (docs/contract.md#run-manifest, #evaluation): the job list and every identity that shapes the results.

The plan is fingerprinted (SHA-256 of its canonical JSON); a run directory holds one plan only, so traces made
under different models, prompts, catalogs or settings can never be mixed. Jobs are the split's tasks in file
order (or a seeded sample), ``repeats`` samples each; an episode's seed is the first four bytes of
SHA-256(``"{seed}:{task_id}:{sample_id}"``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent.prompt import canonical_json, sha256_json
from ..agent.runtime import EpisodeJob
from ..errors import ConfigError
from ..stamps import plan_stamps

PIPELINE_VERSION = "shopsimrl-v0.4"
MANIFEST_SCHEMA = "shopsimrl-run-manifest-v1"
DEFAULT_EVAL_SEED = 20260830


def episode_seed(seed: int, task_id: int, sample_id: int) -> int:
    digest = hashlib.sha256(f"{seed}:{task_id}:{sample_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def build_jobs(
    task_ids: Sequence[int], *, split: str, seed: int = DEFAULT_EVAL_SEED, repeats: int = 1,
    limit: int | None = None, sample_size: int | None = None,
) -> list[EpisodeJob]:
    """Jobs in task order then sample order; ``limit`` keeps the first N tasks, ``sample_size`` a seeded sample."""
    if repeats < 1:
        raise ConfigError("repeats must be at least 1", code="plan")
    ids = list(task_ids)
    if sample_size is not None:
        if not 0 < sample_size <= len(ids):
            raise ConfigError(f"sample_size must be between 1 and {len(ids)}", code="plan")
        ids = random.Random(seed).sample(ids, sample_size)
    if limit is not None:
        if limit < 1:
            raise ConfigError("limit must be at least 1", code="plan")
        ids = ids[:limit]
    return [
        EpisodeJob(task_id=task_id, sample_id=sample, seed=episode_seed(seed, task_id, sample), split=split)
        for task_id in ids for sample in range(repeats)
    ]


@dataclass(frozen=True)
class EvalPlan:
    """The fingerprinted plan of a run directory."""

    plan: Mapping[str, Any]

    @classmethod
    def create(
        cls, *, experiment: str, model: Mapping[str, Any], task_split: Mapping[str, Any],
        jobs: Sequence[EpisodeJob], environment: Mapping[str, Any], runtime: Mapping[str, Any],
        prompt: Mapping[str, Any], skills: Mapping[str, Any], seed: int,
    ) -> EvalPlan:
        return cls({
            "pipeline_version": PIPELINE_VERSION,
            "experiment": experiment,
            "model_id": str(model.get("model") or model.get("policy")),
            "model": dict(model),
            "task_split": dict(task_split),
            "seed": seed,
            "jobs": [job.record() for job in jobs],
            "environment": dict(environment),
            "runtime": dict(runtime),
            "prompt": dict(prompt),
            "skills": dict(skills),
        })

    @property
    def fingerprint(self) -> str:
        return sha256_json(self.plan)

    def jobs(self) -> list[EpisodeJob]:
        return [EpisodeJob(**job) for job in self.plan["jobs"]]

    def provenance(self) -> dict[str, Any]:
        """What every trace of this plan carries (docs/contract.md#traces ``provenance``)."""
        return {
            "model": self.plan["model"], "environment": self.plan["environment"], "prompt": self.plan["prompt"],
            "skills": self.plan["skills"],
            "runtime": {key: self.plan["runtime"][key] for key in ("max_steps", "action_protocol")},
            "stamps": plan_stamps(self.plan),
        }

    def canonical(self) -> str:
        return canonical_json(self.plan)
