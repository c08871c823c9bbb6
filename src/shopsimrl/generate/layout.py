"""The catalog's layout rules: scale knobs, which leaves and how many products each, tasks per user.

Pure functions of the config and the master random stream (``generator.CatalogStream`` draws them in this order).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..errors import DataError
from .vocabulary import Leaf, Vocabulary

LEAF_MIN_ITEMS = 60
LEAF_MAX_ITEMS = 200
LEAF_TYPICAL_ITEMS = 140
"""The default catalog's mean leaf size (23,421 / 170); larger catalogs scale their leaf bounds by it."""
REAL_PRODUCTS, REAL_TWO_AXIS, REAL_PERSONA = 23421, 695, 4526


@dataclass(frozen=True)
class GeneratorConfig:
    """Scale knobs. The defaults reproduce the shape of the real archive (23,421 / 695 / 4,526)."""

    products: int = 23421
    two_axis_products: int | None = None
    """None: the real archive's share, ``round(products * 695 / 23421)``."""
    persona_tasks: int | None = None
    """None: the real archive's share, ``round(products * 4526 / 23421)``."""
    leaf_count: int | None = None
    """How many leaves to use; None: all leaves when they can hold 60–200 items each, else ``products // 80``."""
    large_group_share: float = 0.067
    """Share of the persona tasks owned by one very active user (a linked group that stays in train)."""
    mid_groups: int = 3
    """Users with 25–45 tasks each (also too large for a held-out split)."""
    small_multi_groups: int = 68
    """Users with 2–9 tasks each, at the default persona count (scaled with ``persona_tasks``)."""

    def __post_init__(self) -> None:
        # Errors name the CLI flags (``data generate``), which is where these values come from.
        if self.products < 1:
            raise DataError(f"--products must be positive (got {self.products})", code="generator_config")
        two_axis = self.two_axis_products
        if two_axis is None:
            two_axis = round(self.products * REAL_TWO_AXIS / REAL_PRODUCTS)
            object.__setattr__(self, "two_axis_products", two_axis)
        persona = self.persona_tasks
        if persona is None:
            persona = round(self.products * REAL_PERSONA / REAL_PRODUCTS)
            object.__setattr__(self, "persona_tasks", persona)
        if not 0 <= two_axis <= self.products:
            raise DataError(
                f"--two-axis-products must be between 0 and --products ({self.products}); got {two_axis}", code="generator_config"
            )
        kept = self.products - two_axis
        if not 0 <= persona <= kept:
            raise DataError(
                f"--persona-tasks must be between 0 and --products minus --two-axis-products ({kept}); "
                f"got {persona}", code="generator_config"
            )

    @property
    def two_axis_count(self) -> int:
        """``two_axis_products`` as resolved by ``__post_init__`` (never None after construction)."""
        return self.two_axis_products if self.two_axis_products is not None else 0

    @property
    def persona_count(self) -> int:
        """``persona_tasks`` as resolved by ``__post_init__`` (never None after construction)."""
        return self.persona_tasks if self.persona_tasks is not None else 0

    @property
    def standard_tasks(self) -> int:
        return self.products - self.two_axis_count - self.persona_count



def choose_leaves(vocab: Vocabulary, config: GeneratorConfig, rng: random.Random) -> list[Leaf]:
    leaves = list(vocab.leaves)
    count = config.leaf_count
    if count is None:
        count = len(leaves) if config.products >= LEAF_MIN_ITEMS * len(leaves) else config.products // 80
    count = max(1, min(len(leaves), count))
    if count == len(leaves):
        return leaves
    by_domain: dict[str, list[Leaf]] = {}
    for leaf in leaves:
        by_domain.setdefault(leaf.domain, []).append(leaf)
    for items in by_domain.values():
        rng.shuffle(items)
    chosen: list[Leaf] = []
    while len(chosen) < count:
        for domain in vocab.domains:
            if by_domain[domain] and len(chosen) < count:
                chosen.append(by_domain[domain].pop())
    return sorted(chosen, key=leaves.index)


def split_leaf_sizes(total: int, count: int, rng: random.Random) -> list[int]:
    """Split ``total`` over ``count`` leaves with the default catalog's spread (at any size).

    Up to 200 items a leaf: each leaf gets 60–200 (weights 0.45–1.55 around the mean), evenly when even 60
    each is too many. Beyond that the same weights and bounds are scaled by ``mean / LEAF_TYPICAL_ITEMS``, so
    a 50× catalog has leaves of ~3,000–10,000 products in the same proportions instead of equal leaves.
    """
    low, high = LEAF_MIN_ITEMS, LEAF_MAX_ITEMS
    if total > high * count:
        factor = total / count / LEAF_TYPICAL_ITEMS
        low, high = math.floor(LEAF_MIN_ITEMS * factor), math.ceil(LEAF_MAX_ITEMS * factor)
    if not low * count <= total <= high * count:
        base, extra = divmod(total, count)
        return [base + (1 if i < extra else 0) for i in range(count)]
    weights = [rng.uniform(0.45, 1.55) for _ in range(count)]
    scale = total / sum(weights)
    sizes = [min(high, max(low, int(w * scale))) for w in weights]
    order = list(range(count))
    rng.shuffle(order)
    while (gap := total - sum(sizes)) != 0:
        step = 1 if gap > 0 else -1
        for i in order:
            if sizes[i] + step < low or sizes[i] + step > high:
                continue
            sizes[i] += step
            gap -= step
            if gap == 0:
                break
    return sizes


def user_group_sizes(config: GeneratorConfig, rng: random.Random) -> list[int]:
    """Tasks per user: one large user, a few mid-size ones, some small multi-task ones, the rest singletons."""
    total = config.persona_count
    scale = total / 4526
    sizes: list[int] = []
    large = round(total * config.large_group_share)
    if large >= 2:
        sizes.append(large)
    if total >= 1000:
        sizes.extend(rng.randint(25, 45) for _ in range(config.mid_groups))
    for _ in range(round(config.small_multi_groups * scale)):
        sizes.append(rng.randint(2, 9))
    while sum(sizes) > total:
        sizes.pop()
    sizes.extend([1] * (total - sum(sizes)))
    return sizes
