"""What one rollout produces: the token ledger (sampled tokens trained once, prompt and context tokens
masked), its segments and the episode's trajectory. Private to the rollout core (``rollout.py`` re-exports
the public names); split out so that the turn loop and the data it fills stay readable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

COMPLETED, TRUNCATED, ABORTED = "completed", "truncated", "aborted"  # a Trajectory's status


@dataclass
class Segment:
    """One token-contiguous training sequence: a prompt, then alternating sampled and context tokens.

    ``loss_mask`` and ``log_probs`` are aligned with ``tokens``; the first ``prompt_length`` tokens are the
    prompt (mask 0). ``response_*`` are the slices after the prompt, the form slime and verl want.
    """

    tokens: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    prompt_length: int = 0
    turns: int = 0

    @property
    def response_tokens(self) -> list[int]:
        return self.tokens[self.prompt_length:]

    @property
    def response_mask(self) -> list[int]:
        return self.loss_mask[self.prompt_length:]

    @property
    def response_log_probs(self) -> list[float]:
        return self.log_probs[self.prompt_length:]

    @property
    def trained_tokens(self) -> list[int]:
        return [t for t, m in zip(self.tokens, self.loss_mask, strict=True) if m]


@dataclass
class Trajectory:
    """One episode for a trainer: segments, the scalar reward (``r_strict``), its detail and a status."""

    task_id: int
    status: str
    segments: list[Segment]
    reward: float
    reward_detail: dict[str, Any] | None
    generated_tokens: list[int]
    messages: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None

    @property
    def scored(self) -> bool:
        return self.status != ABORTED

    @property
    def success(self) -> float:
        return float((self.reward_detail or {}).get("r_success", 0.0))

    @property
    def trained_tokens(self) -> list[int]:
        return [t for segment in self.segments for t in segment.trained_tokens]

    # Flat views for the common single-segment case (and for trainers that take one sequence per episode).
    @property
    def token_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.tokens]

    @property
    def loss_mask(self) -> list[int]:
        return [m for s in self.segments for m in s.loss_mask]

    @property
    def log_probs(self) -> list[float]:
        return [p for s in self.segments for p in s.log_probs]


class TokenLedger:
    """Appends prompts and samples to segments; a prompt that is not an extension starts a new segment."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.generated: list[int] = []

    def prompt(self, prompt_ids: Sequence[int]) -> None:
        prompt_ids = list(prompt_ids)
        current = self.segments[-1] if self.segments else None
        if current is not None:
            n = len(current.tokens)
            if len(prompt_ids) >= n and prompt_ids[:n] == current.tokens:
                extra = prompt_ids[n:]
                current.tokens.extend(extra)
                current.loss_mask.extend([0] * len(extra))
                current.log_probs.extend([0.0] * len(extra))
                return
        self.segments.append(Segment(tokens=prompt_ids, loss_mask=[0] * len(prompt_ids),
                                     log_probs=[0.0] * len(prompt_ids), prompt_length=len(prompt_ids)))

    def sample(self, token_ids: Sequence[int], log_probs: Sequence[float]) -> None:
        segment = self.segments[-1]
        segment.tokens.extend(token_ids)
        segment.loss_mask.extend([1] * len(token_ids))
        segment.log_probs.extend(float(p) for p in log_probs)
        segment.turns += 1
        self.generated.extend(token_ids)

    def trainable(self) -> list[Segment]:
        """Segments with at least one sampled token (a trailing prompt-only segment carries nothing)."""
        return [s for s in self.segments if any(s.loss_mask)]
