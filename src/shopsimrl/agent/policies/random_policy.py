"""The random policy: a legal random action each turn, seeded by (seed, turn), never the global RNG."""

from __future__ import annotations

import hashlib
import random

from ...errors import PolicyError
from ..page_text import parse_page
from ..policy import PolicyAction, PolicyContext

SEARCH_WORDS_LIMIT = 6


class RandomPolicy:
    """Searches a few random words of the instruction, then clicks uniformly among the offered values."""

    name = "random"

    def act(self, context: PolicyContext) -> PolicyAction:
        digest = hashlib.sha256(
            f"{context.seed}:{context.instruction}:{len(context.history)}".encode()
        ).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if context.search_offered:
            chars = [c for c in context.instruction if not c.isspace()]
            if not chars:
                return PolicyAction.search("商品", "random: search")
            start = rng.randrange(len(chars))
            return PolicyAction.search("".join(chars[start : start + SEARCH_WORDS_LIMIT]) or chars[0], "random: search")
        clicks = context.click_values()
        if not clicks:
            raise PolicyError(f"the random policy has no action on this page ({parse_page(context.observation).kind})")
        return PolicyAction.click(rng.choice(clicks), "random: click")
