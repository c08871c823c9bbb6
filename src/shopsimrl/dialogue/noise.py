"""Controlled noise, drawn once per slot at reset from a ``random.Random`` seeded by the task and sample seed.

Draws happen in slot order with a fixed number of draws per slot whatever the rates, so the same task and
seed give the same plan at any rate settings; the module never touches the global RNG.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..versions import RULE_SHOPPER_VERSION
from .config import NoiseConfig
from .slots import ATTRIBUTE, BUDGET, PRODUCT, Slot, format_amount
from .vocabulary import paraphrases


def episode_rng(task_id: int, sample_seed: int, stream: str) -> random.Random:
    """A private generator for one (task, sample seed, purpose); stable across processes and platforms."""
    key = f"{RULE_SHOPPER_VERSION}|{stream}|{task_id}|{sample_seed}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


@dataclass(frozen=True, slots=True)
class SlotNoise:
    """What noise does to one slot: left unanswered, a different wording, or a blurred budget."""

    omit: bool = False
    phrase: str | None = None
    event: str = ""


def approximate(value: float) -> float:
    """The budget rounded to two significant figures (``715`` → ``720``, ``54.9`` → ``55``)."""
    if value <= 0:
        return value
    digits = len(str(int(value))) - 2
    return float(round(value, -digits)) if digits > 0 else float(round(value))


def plan_noise(slots: Sequence[Slot], noise: NoiseConfig, task_id: int, sample_seed: int) -> dict[int, SlotNoise]:
    """Per slot index, the noise it gets (slots without noise are absent)."""
    rng = episode_rng(task_id, sample_seed, "noise")
    table = paraphrases()
    plan: dict[int, SlotNoise] = {}
    for slot in slots:
        u_omit, u_change, u_pick = rng.random(), rng.random(), rng.random()
        if slot.kind == PRODUCT:
            continue
        if u_omit < noise.omit:
            plan[slot.index] = SlotNoise(omit=True, event=f"omit:{slot.name}")
        elif slot.kind == ATTRIBUTE and u_change < noise.paraphrase:
            choices = [phrase for phrase in table.get(slot.value, ()) if phrase != slot.phrase]
            if choices:
                phrase = choices[min(int(u_pick * len(choices)), len(choices) - 1)]
                plan[slot.index] = SlotNoise(phrase=phrase, event=f"paraphrase:{slot.name}")
        elif slot.kind == BUDGET and slot.price_upper is not None and u_change < noise.approximate_budget:
            phrase = f"大概{format_amount(approximate(slot.price_upper))}块钱吧"
            plan[slot.index] = SlotNoise(phrase=phrase, event="approximate:budget")
    return plan
