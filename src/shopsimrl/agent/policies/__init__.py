"""Built-in policies, registered once in :data:`REGISTRY`: the CLI (``eval --policy``, ``policy-server
--policy``), evaluation, the difficulty benchmark and the tests all read this table.

Adding a policy: its module here (a class with ``name`` and ``act``) and one :class:`PolicySpec` row.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ...env.shop_env import ShopWorld
from ...errors import PolicyError
from ..policy import Policy
from .oracle import OraclePolicy


@dataclass(frozen=True)
class PolicySpec:
    """One built-in policy: its name, where its class lives (imported when first built) and what it is."""

    name: str
    target: str  # "module:Class" in this package; the class takes the world when ``private_goal``
    summary: str  # one line for the command line's help
    private_goal: bool = False  # reads the private goal: a solvability check, never a baseline
    dialogue: bool = False  # asks the shopper (dialogue mode: eval --shopper)
    catalog_bound: bool = False  # trained weights bound to one catalog: the class takes the world to check it

    @property
    def label(self) -> str:
        """How the policy is named in tables and reports (the oracle is always marked)."""
        return f"{self.name} (solvability check)" if self.name == "oracle" else self.name

    def build(self, world: ShopWorld) -> Policy:
        module, _, attribute = self.target.partition(":")
        cls: Any = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        policy: Policy = cls(world) if self.private_goal or self.catalog_bound else cls()
        return policy


REGISTRY: dict[str, PolicySpec] = {spec.name: spec for spec in (
    PolicySpec("oracle", "oracle:OraclePolicy", "reads the private goal (solvability check)", private_goal=True),
    PolicySpec("heuristic", "heuristic:HeuristicPolicy", "public-information baseline"),
    PolicySpec("random", "random_policy:RandomPolicy", "random words of the task, then random offered clicks (seeded)"),
    PolicySpec("first", "first_policy:FirstResultPolicy", "first result, first option values (the trivial floor)"),
    PolicySpec("strong", "strong_rule:StrongRulePolicy", "rule policy that knows the catalog's vocabulary"),
    PolicySpec("learned", "learned:LearnedPolicy", "linear policy trained by RL on the default catalog's train split",
               catalog_bound=True),
    PolicySpec("dialogue-heuristic", "dialogue:DialogueHeuristicPolicy", "asks the shopper first, then the heuristic",
               dialogue=True),
    PolicySpec("dialogue-strong", "dialogue:DialogueStrongPolicy", "asks the shopper first, then the strong rule policy",
               dialogue=True),
    PolicySpec("dialogue-oracle", "dialogue:DialogueOraclePolicy",
               "asks every slot, then the oracle (solvability check)", private_goal=True, dialogue=True),
)}
POLICY_NAMES = tuple(REGISTRY)


def policy_spec(name: str) -> PolicySpec:
    spec = REGISTRY.get(name)
    if spec is None:
        raise PolicyError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
    return spec


def make_policy(name: str, world: ShopWorld) -> Policy:
    """A built-in policy by name (the oracles need ``world`` to read private goals)."""
    return policy_spec(name).build(world)


def policy_help() -> str:
    """The registry as one help line for ``--policy``."""
    return "; ".join(f"{spec.name}: {spec.summary}" for spec in REGISTRY.values())


__all__ = ["POLICY_NAMES", "REGISTRY", "OraclePolicy", "PolicySpec", "make_policy", "policy_help", "policy_spec"]
