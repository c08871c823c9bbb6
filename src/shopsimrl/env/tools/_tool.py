"""What a tool is: its name, its one argument's schema, when a page offers it, how it applies to a session.

Every other view of a tool is derived from one :class:`Tool` object: the per-page OpenAI function schema (the
runtime, OpenEnv, the HTTP clients), the whole-episode schema (chat templates, OpenEnv's static MCP list), the
docstrings TRL and verifiers build their schemas from, the validator's argument check and the session's
dispatch. A tool owns its change (as a tau2-bench tool is the method that changes the state): its checks, which
transition each argument makes and its feedback live in its own module (``search.py``, ``click.py``,
``ask_user.py``), written with the few general primitives of :class:`ToolSession` that both session classes
implement; a new tool needs no new session method (its own state, if any, goes in :meth:`ToolSession.tool_state`).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from ...contract import format_action
from .._product_view import ProductView


class Conversation(Protocol):
    """The shopper of a dialogue episode, as a tool sees it: the questions left, and one question asked."""

    def questions_left(self) -> int: ...

    def ask(self, question: str) -> str:
        """The shopper's reply; the question is counted (may raise ShopperCallError before anything is counted)."""
        ...


class ToolSession(Protocol):
    """The general primitives a tool works through (``ShopSession`` / ``DialogueSession`` implement them): what the
    page is, and the transitions between pages. Which argument makes which transition is the tool's own rule."""

    dialogue: bool  # whether dialogue-only tools apply
    page: str  # the page type (contract.SEARCH_HOME, SEARCH_RESULTS, PRODUCT_DETAIL, TERMINAL)
    page_number: int  # the results page shown (1-based; 0 on the search home)
    options: dict[str, str]  # the product page's selected options, axis → value
    view: ProductView | None  # the open product's page data (None off the product page)

    # ----------------------------------------------------------------- reading the page
    def clickables(self) -> list[str]: ...
    def page_asins(self) -> tuple[str, ...]: ...
    def missing_axes(self) -> list[str]: ...
    @property
    def conversation(self) -> Conversation | None:
        """The shopper to ask (None outside dialogue mode)."""
        ...
    def tool_state(self, tool: str) -> dict[str, Any]:
        """The episode's own state of ``tool`` (an empty dict at first), for a tool that keeps any."""
        ...

    # ----------------------------------------------------------------- changing it
    def run_search(self, query: str) -> None:
        """Run ``query`` and show its first results page."""
        ...
    def show_results(self, page_number: int) -> None:
        """Show results page ``page_number`` of the last search (closing the product page, if open)."""
        ...
    def go_home(self) -> None:
        """Back to the search home (the search and the product are forgotten)."""
        ...
    def open_product(self, asin: str) -> None: ...
    def select_option(self, axis: str, value: str) -> None: ...
    def buy(self) -> None:
        """Buy the open product with the selected options: scored, and the episode ends."""
        ...


def _function(name: str, description: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: value},
                "required": [key],
                "additionalProperties": False,
            },
        },
    }


class Tool(ABC):
    """One tool of the environment. Subclasses set the class attributes and implement :meth:`offered` and
    :meth:`apply`; the schemas and docstrings below are derived, so every path describes the tool alike."""

    name: ClassVar[str]
    argument: ClassVar[str]  # the tool's one argument key
    description: ClassVar[str]
    argument_description: ClassVar[str]
    # The argument's description in the whole-episode list (where the page's enum is absent), if it differs.
    episode_argument_description: ClassVar[str | None] = None
    min_length: ClassVar[int | None] = None
    max_length: ClassVar[int | None] = None
    returns: ClassVar[str] = "The new page as text."
    argument_kind: ClassVar[str] = "text"  # what the argument holds, in one word or two (OpenEnv's field description)
    dialogue_only: ClassVar[bool] = False  # offered and applied in dialogue episodes only
    feedback_codes: ClassVar[tuple[str, ...]] = ()  # the ``reason`` codes :meth:`apply` may return

    # ----------------------------------------------------------------- when it is offered
    @abstractmethod
    def offered(self, state: Mapping[str, Any]) -> bool:
        """Whether the page (an ``observation_state``) offers this tool."""

    def applies_to(self, session: ToolSession) -> bool:
        """Whether the session understands this tool at all (otherwise its action is an unknown name)."""
        return session.dialogue or not self.dialogue_only

    # ----------------------------------------------------------------- schemas
    def argument_schema(self, state: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The argument's JSON schema on a page (``state``), or its constraints alone (``None``)."""
        schema: dict[str, Any] = {"type": "string"}
        if self.min_length is not None:
            schema["minLength"] = self.min_length
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        schema["description"] = self.argument_description
        return schema

    def schema(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The OpenAI function tool for this page (call when :meth:`offered`)."""
        return _function(self.name, self.description, self.argument, self.argument_schema(state))

    def episode_schema(self) -> dict[str, Any]:
        """The tool for a whole episode (listed once, offered or not on a page): no per-page enum or bounds."""
        description = self.episode_argument_description or self.argument_description
        return _function(self.name, self.description, self.argument, {"type": "string", "description": description})

    def parameters(self) -> dict[str, Any]:
        """The parameter schema the validator checks every call against (the page's enum left to the env)."""
        parameters: dict[str, Any] = _function(self.name, self.description, self.argument,
                                               self.argument_schema())["function"]["parameters"]
        return parameters

    def google_docstring(self) -> str:
        """The docstring TRL (``transformers.utils.get_json_schema``) reads the episode schema from."""
        description = self.episode_argument_description or self.argument_description
        return (f"\n{self.description}\n\nArgs:\n    {self.argument}: {description}\n\n"
                f"Returns:\n    {self.returns}\n")

    def short_docstring(self) -> str:
        """The one-paragraph docstring verifiers' ``@vf.tool`` uses as the description."""
        description = self.episode_argument_description or self.argument_description
        return f"{self.description}{self.argument}：{description}"

    # ----------------------------------------------------------------- applying
    def action(self, value: object) -> str:
        """The canonical action string of a call with argument ``value``."""
        return format_action(self.name, value)

    @abstractmethod
    def apply(self, session: ToolSession, argument: str | None, shown: str) -> dict[str, Any]:
        """Check ``argument`` on the session's page, change the session when valid; returns the feedback.

        ``shown`` is the action as the feedback repeats it; ``argument`` is verbatim (None for a bare name).
        """


def tool_method(tool: Tool, doc: str, act: Callable[[Any, str], Any], *, is_async: bool = False) -> Callable[..., Any]:
    """A method named after ``tool`` whose one ``str`` parameter is the tool's argument, for frameworks that build a
    tool's schema from a method's signature and docstring (TRL's environment class, verifiers' toolset);
    ``act(instance, action)`` applies the canonical action. A wrong or missing argument is a TypeError, as for
    a ``def``."""
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter(tool.argument, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)],
        return_annotation=str)

    def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = signature.bind(*args, **kwargs)
        return act(bound.arguments["self"], tool.action(bound.arguments[tool.argument]))

    def method(*args: Any, **kwargs: Any) -> Any:
        return apply(args, kwargs)

    async def async_method(*args: Any, **kwargs: Any) -> Any:
        return apply(args, kwargs)

    function: Any = async_method if is_async else method
    function.__name__ = function.__qualname__ = tool.name
    function.__doc__ = doc
    function.__annotations__ = {tool.argument: str, "return": str}
    function.__signature__ = signature  # what inspect.signature reads
    result: Callable[..., Any] = function
    return result

