"""Step-level credit: a stable key of the page each step acted on, for algorithms that group identical states
across a group's rollouts (GiGPO's anchor states, verl-agent's step groups).

The key is the SHA-256 (first 16 hex digits) of the canonical observation state: the page as JSON with sorted
keys, without ``last_action`` (how the page was reached, not what it is), so two rollouts standing on the same
page get the same key whatever they did before. It depends on nothing but the page (no clock, no session).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..hashing import sha256_hex

EXCLUDED = ("last_action",)
KEY_HEX = 16


def canonical_state(state: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in state.items() if k not in EXCLUDED}, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"))


def state_key(state: Mapping[str, Any]) -> str:
    """The page's key (16 hex digits)."""
    return sha256_hex(canonical_state(state).encode("utf-8"))[:KEY_HEX]
