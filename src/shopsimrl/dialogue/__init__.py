"""Dialogue mode (issue 16): a simulated shopper that knows the goal and answers the agent's ``ask_user`` questions.

The rule shopper needs no model: slots built from the goal at reset, a keyword lexicon that matches questions
to slots, fixed colloquial reply templates and optional seeded noise, so a dialogue is byte-identical across
runs and processes when the noise is off.
"""

from .config import NoiseConfig, ShopperConfig
from .rule_shopper import RuleShopper, ShopperReply
from .slots import Slot, build_slots

SHOPPER_NAMES = ("rule",)

__all__ = ["SHOPPER_NAMES", "NoiseConfig", "RuleShopper", "ShopperConfig", "ShopperReply", "Slot", "build_slots"]
