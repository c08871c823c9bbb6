"""Small, fast draws on an explicit ``random.Random`` (never the global RNG).

``Random.choice``/``Random.sample`` spend most of their time in type checks and bit-level rejection
sampling; the generator makes hundreds of thousands of small draws, so these use one ``random()`` call per
pick instead. They are deterministic for a given stream, which is all the generator needs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def pick(rng: random.Random, items: Sequence[T]) -> T:
    """One item of a non-empty sequence."""
    return items[int(rng.random() * len(items))]


def pick_many(rng: random.Random, items: Sequence[T], count: int) -> list[T]:
    """``count`` distinct positions of ``items`` in random order (a partial Fisher–Yates shuffle)."""
    pool = list(items)
    size = len(pool)
    if not 0 <= count <= size:
        raise ValueError("sample larger than population")
    for i in range(count):
        j = i + int(rng.random() * (size - i))
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:count]
