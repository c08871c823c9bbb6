"""Step-level credit: a stable key of the page each step acted on, for algorithms that group identical states
across a group's rollouts (GiGPO's anchor states, verl-agent's step groups).

The key is the SHA-256 (first 16 hex digits) of the canonical observation state: the page as JSON with sorted
keys, without ``last_action`` (how the page was reached, not what it is), so two rollouts standing on the same
page get the same key whatever they did before. It depends on nothing but the page (no clock, no session).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import ShopSimError
from ..hashing import sha256_hex

EXCLUDED = ("last_action",)
KEY_HEX = 16


def canonical_state(state: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in state.items() if k not in EXCLUDED}, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"))


def state_key(state: Mapping[str, Any]) -> str:
    """The page's key (16 hex digits)."""
    return sha256_hex(canonical_state(state).encode("utf-8"))[:KEY_HEX]


def model_turn_keys(steps: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``state_key`` of each model turn of an episode, in order (the step list without context-overflow
    steps, which sampled nothing): the k-th key belongs to the k-th run of sampled tokens."""
    return [str(step["state_key"]) for step in steps if "sampled_tokens" in step and "state_key" in step]


def join_keys(keys: Sequence[str]) -> str:
    """One row's keys as one string (verl's extra fields are a 1-D object array: a list per row breaks it)."""
    return " ".join(keys)


def split_keys(value: str | Sequence[str] | None) -> list[str]:
    """A row's keys as exported by any adapter: verl's space-separated string, or TRL's / slime's list."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    return [str(k) for k in value]


def step_groups(groups: Sequence[Hashable], keys: Sequence[str | Sequence[str] | None]
                ) -> dict[tuple[Hashable, str], list[tuple[int, int]]]:
    """GiGPO-style step groups of a batch: ``(group, state_key)`` → the ``(row, model turn)`` pairs standing on
    that page, over the rows of each GRPO group (``groups``: verl's ``uid``, TRL's prompt block, slime's
    ``group_index``; ``keys``: each row's exported keys). Rows and turns keep batch order."""
    if len(groups) != len(keys):
        raise ShopSimError(f"{len(groups)} group ids for {len(keys)} rows of state keys")
    out: dict[tuple[Hashable, str], list[tuple[int, int]]] = {}
    for row, (group, value) in enumerate(zip(groups, keys, strict=True)):
        for turn, key in enumerate(split_keys(value)):
            out.setdefault((group, key), []).append((row, turn))
    return out
