"""The shoppers of dialogue mode, registered once and handed to the environment (``ShopEnv(world,
shoppers=shopper_registry(llm=...))``), the way the policy registry hands policies to evaluation.

Adding a shopper: its module here (a class with ``name``, ``version``, ``config``, ``slots``, ``transcript``,
``opening``, ``reply`` and ``slot_recall``: :class:`shopsimrl.env.shoppers.Shopper`), one row in :data:`SHOPPERS`
and its name in ``contract.SHOPPER_NAMES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..contract import LLM_SHOPPER, RULE_SHOPPER
from ..env.shoppers import Shopper
from ..errors import RequestError
from .config import ShopperConfig
from .llm_shopper import LLMShopper, LLMShopperSettings, ShopperEndpoint
from .rule_shopper import RuleShopper

# name → how one is built from (goal, product record, settings, the LLM endpoint or None).
ShopperBuilder = Callable[[Mapping[str, Any], Mapping[str, Any] | None, ShopperConfig | None, ShopperEndpoint | None],
                         Shopper]


def _rule(goal: Mapping[str, Any], product: Mapping[str, Any] | None, config: ShopperConfig | None,
          endpoint: ShopperEndpoint | None) -> Shopper:
    return RuleShopper(goal, product, config)


def _llm(goal: Mapping[str, Any], product: Mapping[str, Any] | None, config: ShopperConfig | None,
         endpoint: ShopperEndpoint | None) -> Shopper:
    assert endpoint is not None  # offered only with an endpoint (DialogueShoppers.names)
    return LLMShopper(goal, product, config, endpoint)


SHOPPERS: dict[str, ShopperBuilder] = {RULE_SHOPPER: _rule, LLM_SHOPPER: _llm}
NEEDS_ENDPOINT = frozenset({LLM_SHOPPER})


@dataclass(frozen=True)
class DialogueShoppers:
    """The registry an environment is given: every shopper of :data:`SHOPPERS` (``llm`` only with ``llm``)."""

    llm: ShopperEndpoint | None = None

    def names(self) -> tuple[str, ...]:
        return tuple(name for name in SHOPPERS if self.llm is not None or name not in NEEDS_ENDPOINT)

    def settings(self, config: object, seed: int | None) -> ShopperConfig | None:
        if config is not None and not isinstance(config, ShopperConfig):
            raise RequestError("shopper_config must be a ShopperConfig", code="dialogue_unavailable")
        if seed is None:
            return config
        base = config or ShopperConfig()  # the episode seed (eval passes the job's) replaces the sample seed
        return ShopperConfig(max_questions=base.max_questions, sample_seed=seed, noise=base.noise)

    def build(self, name: str, goal: Mapping[str, Any], product: Mapping[str, Any] | None, settings: Any) -> Shopper:
        return SHOPPERS[name](goal, product, settings, self.llm)


def shopper_registry(*, llm: ShopperEndpoint | LLMShopperSettings | None = None) -> DialogueShoppers:
    """The shoppers for an environment: ``rule`` always, ``llm`` asking ``llm`` (settings get their own client)."""
    if isinstance(llm, LLMShopperSettings):
        llm = ShopperEndpoint(llm)
    if llm is not None and not isinstance(llm, ShopperEndpoint):
        raise RequestError("llm_shopper must be LLMShopperSettings or a ShopperEndpoint", code="dialogue_unavailable")
    return DialogueShoppers(llm)
