"""Settings of a dialogue episode: the question limit, the sample seed and the shopper's noise rates."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import RequestError
from ..versions import DEFAULT_MAX_QUESTIONS

MAX_QUESTIONS_CAP = 1000


def _rate(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(f"noise rate {name} must be a number between 0 and 1", code="dialogue_unavailable")
    if not 0.0 <= float(value) <= 1.0:
        raise RequestError(f"noise rate {name} must be between 0 and 1, got {value}", code="dialogue_unavailable")
    return float(value)


@dataclass(frozen=True, slots=True)
class NoiseConfig:
    """Probabilities, drawn once per slot at reset: leave a slot unanswered, blur the budget, paraphrase.

    All zero (the default) is the noise-free shopper whose dialogue is byte-identical everywhere.
    """

    omit: float = 0.0
    approximate_budget: float = 0.0
    paraphrase: float = 0.0

    def __post_init__(self) -> None:
        for name in ("omit", "approximate_budget", "paraphrase"):
            _rate(name, getattr(self, name))

    @property
    def off(self) -> bool:
        return self.omit == 0.0 and self.approximate_budget == 0.0 and self.paraphrase == 0.0


@dataclass(frozen=True, slots=True)
class ShopperConfig:
    """How many questions the agent may ask (``ask_user`` disappears after that), the sample seed, the noise."""

    max_questions: int = DEFAULT_MAX_QUESTIONS
    sample_seed: int = 0
    noise: NoiseConfig = field(default_factory=NoiseConfig)

    def __post_init__(self) -> None:
        limit = self.max_questions
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_QUESTIONS_CAP:
            raise RequestError(f"max_questions must be an integer between 0 and {MAX_QUESTIONS_CAP}", code="dialogue_unavailable")
        if isinstance(self.sample_seed, bool) or not isinstance(self.sample_seed, int):
            raise RequestError("sample_seed must be an integer", code="dialogue_unavailable")
        if not isinstance(self.noise, NoiseConfig):
            raise RequestError("noise must be a NoiseConfig", code="dialogue_unavailable")
