"""What a dialogue episode needs from a shopper, and from whoever supplies the shoppers.

The environment is given its shoppers (a :class:`ShopperRegistry`: ``shopsimrl.dialogue.registry.shopper_registry``,
as ``ShopEnv(world, shoppers=shopper_registry())``) and never imports them, so ``env`` stays below ``dialogue``:
the shoppers read the goal and the generator's vocabulary, the environment only asks them questions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, Protocol

from ..contract import LLM_SHOPPER
from ..errors import RequestError

NO_ENDPOINT: Final = (
    "shopper 'llm' needs an LLM shopper endpoint: ShopEnv(world, shoppers=shopper_registry(llm=LLMShopperSettings("
    "base_url, model))), `serve --shopper-base-url URL --shopper-model M` or `eval --shopper llm --shopper-base-url "
    "URL --shopper-model M`")


class ShopperReply(Protocol):
    """One answer of the shopper (the environment reads its text)."""

    @property
    def text(self) -> str: ...


class ShopperSettings(Protocol):
    """The episode's shopper settings (the environment reads the question limit)."""

    @property
    def max_questions(self) -> int: ...


class ShopperSlot(Protocol):
    """One private requirement of the goal (named in a private reset's ``shopper_slots``)."""

    @property
    def name(self) -> str: ...


class Shopper(Protocol):
    """One episode's shopper: an opening, a reply per question, the private transcript and slot recall."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def config(self) -> ShopperSettings: ...
    @property
    def slots(self) -> Sequence[ShopperSlot]: ...
    @property
    def transcript(self) -> list[dict[str, Any]]: ...

    def opening(self) -> str: ...
    def reply(self, question: str) -> ShopperReply: ...
    def slot_recall(self) -> tuple[int, int]: ...


class ShopperRegistry(Protocol):
    """The shoppers an environment may start (``reset(..., shopper=name)``), and their settings."""

    def names(self) -> Collection[str]:
        """The shoppers offered (``llm`` only with an endpoint)."""
        ...

    def settings(self, config: object, seed: int | None) -> Any:
        """The episode's settings: ``config`` checked (RequestError dialogue_unavailable), ``seed`` replacing its sample seed."""
        ...

    def build(self, name: str, goal: Mapping[str, Any], product: Mapping[str, Any] | None, settings: Any) -> Shopper:
        """A new shopper ``name`` (one of :meth:`names`) for ``goal`` and its product's record."""
        ...


def check_offered(shopper: object, offered: Collection[str]) -> None:
    """A known shopper the environment was not given is refused (``llm`` without an endpoint, or no registry)."""
    if shopper is None or shopper in offered:
        return
    if shopper == LLM_SHOPPER:
        raise RequestError(NO_ENDPOINT, code="dialogue_unavailable")
    raise RequestError(f"shopper {shopper!r} was not given to this environment: "
                        "ShopEnv(world, shoppers=shopper_registry()) (shopsimrl.dialogue.registry)", code="dialogue_unavailable")
