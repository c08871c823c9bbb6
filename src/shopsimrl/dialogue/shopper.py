"""What a dialogue episode needs from a shopper, whichever plays it (the rule shopper or the LLM shopper)."""

from __future__ import annotations

from typing import Any, Protocol

from .config import ShopperConfig
from .rule_shopper import ShopperReply
from .slots import Slot


class Shopper(Protocol):
    """One episode's shopper: an opening, a reply per question, the private transcript and slot recall."""

    name: str
    version: str
    config: ShopperConfig
    slots: tuple[Slot, ...]
    transcript: list[dict[str, Any]]

    def opening(self) -> str: ...

    def reply(self, question: str) -> ShopperReply: ...

    def slot_recall(self) -> tuple[int, int]: ...
