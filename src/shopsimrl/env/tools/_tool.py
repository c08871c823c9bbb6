"""What a tool is: its name, its one argument's schema, when a page offers it, how it applies to a session.

Every other view of a tool is derived from one :class:`Tool` object: the per-page OpenAI function schema (the
runtime, OpenEnv, the HTTP clients), the whole-episode schema (chat templates, OpenEnv's static MCP list), the
docstrings TRL and verifiers build their schemas from, the validator's argument check and the session's
dispatch. A tool's checks and feedback live in its own module (``search.py``, ``click.py``, ``ask_user.py``);
the session only owns the page state those checks read and the transitions they call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from ...contract import format_action


class ToolSession(Protocol):
    """What a tool may read and call on the episode it is applied to (``ShopSession`` / ``DialogueSession``)."""

    dialogue: bool
    page: str
    options: dict[str, str]

    def clickables(self) -> list[str]: ...
    def missing_axes(self) -> list[str]: ...
    def run_search(self, query: str) -> None: ...
    def click_label(self, label: str) -> None: ...
    def buy(self) -> None: ...
    def questions_left(self) -> int: ...
    def ask(self, question: str) -> str: ...


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
