"""Built-in policies: ``oracle`` (reads the private goal), ``heuristic`` (public information), ``random``, ``first``
(first result, first option values: the trivial floor of the difficulty targets)."""

from __future__ import annotations

from ...env.shop_env import ShopWorld
from ..policy import Policy, PolicyError
from .oracle import OraclePolicy

POLICY_NAMES = ("oracle", "heuristic", "random", "first", "strong", "dialogue-heuristic", "dialogue-strong",
                "dialogue-oracle")


def make_policy(name: str, world: ShopWorld) -> Policy:
    """A built-in policy by name (the oracle needs ``world`` to read private goals)."""
    if name == "oracle":
        return OraclePolicy(world)
    if name == "heuristic":
        from .heuristic import HeuristicPolicy

        return HeuristicPolicy()
    if name == "random":
        from .random_policy import RandomPolicy

        return RandomPolicy()
    if name == "first":
        from .first_policy import FirstResultPolicy

        return FirstResultPolicy()
    if name == "strong":
        from .strong_rule import StrongRulePolicy

        return StrongRulePolicy()
    if name == "dialogue-heuristic":  # dialogue mode (--shopper): ask first, then the heuristic
        from .dialogue import DialogueHeuristicPolicy

        return DialogueHeuristicPolicy()
    if name == "dialogue-strong":  # the same script, then the strong rule policy
        from .dialogue import DialogueHeuristicPolicy
        from .strong_rule import StrongRulePolicy

        return DialogueHeuristicPolicy(inner=StrongRulePolicy(), name="dialogue-strong")
    if name == "dialogue-oracle":  # dialogue mode solvability check: ask every slot, then the oracle
        from .dialogue import DialogueOraclePolicy

        return DialogueOraclePolicy(world)
    raise PolicyError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")


__all__ = ["POLICY_NAMES", "OraclePolicy", "make_policy"]
