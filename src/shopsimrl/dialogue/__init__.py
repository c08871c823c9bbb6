"""Dialogue mode: a simulated shopper that knows the goal and answers the agent's ``ask_user`` questions.

The rule shopper needs no model: slots built from the goal at reset, a keyword lexicon that matches questions
to slots, fixed colloquial reply templates and optional seeded noise, so a dialogue is byte-identical across
runs and processes when the noise is off. The LLM shopper (``llm_shopper``) plays the same part through any
OpenAI-compatible endpoint, with its replies cached by a hash of the conversation.
"""

from ..contract import SHOPPER_NAMES as SHOPPER_NAMES
from .config import NoiseConfig, ShopperConfig
from .llm_shopper import LLMShopper, LLMShopperSettings, ShopperEndpoint
from .rule_shopper import RuleShopper, ShopperReply
from .slots import Slot, build_slots

__all__ = [
    "SHOPPER_NAMES", "LLMShopper", "LLMShopperSettings", "NoiseConfig", "RuleShopper", "ShopperConfig", "ShopperEndpoint",
    "ShopperReply", "Slot", "build_slots",
]
