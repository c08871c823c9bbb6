"""A tool the project does not have, ``note(text)``, written the way a new tool is (issue 40 item 4): its own module
with its name, argument schema, descriptions, when a page offers it and how it changes the episode, through the
general session primitives only (here :meth:`ToolSession.tool_state`: it keeps its notes there). Registering it
is one line, ``TOOLS.append(NOTE)`` (``tests/test_tool_registry.py`` does that and plays it through the env)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from shopsimrl.contract import EMPTY_ARGUMENT, EXECUTED, SEARCH_HOME
from shopsimrl.env._actions import feedback
from shopsimrl.env.tools import Tool, ToolSession

NOTE_DESCRIPTION = "记下一句话（页面不会改变）。"
TEXT_DESCRIPTION = "要记下的话。"
MSG_EMPTY_NOTE = "note[...] 的内容不能为空"
MSG_NOTED = "记下了："


class NoteTool(Tool):
    """Offered on the search home; a valid call appends its text to the episode's notes and leaves the page."""

    name: ClassVar[str] = "note"
    argument: ClassVar[str] = "text"
    description: ClassVar[str] = NOTE_DESCRIPTION
    argument_description: ClassVar[str] = TEXT_DESCRIPTION
    min_length: ClassVar[int | None] = 1
    max_length: ClassVar[int | None] = 8
    returns: ClassVar[str] = "The page, unchanged."
    feedback_codes: ClassVar[tuple[str, ...]] = (EXECUTED, EMPTY_ARGUMENT)

    def offered(self, state: Mapping[str, Any]) -> bool:
        return state.get("page_type") == SEARCH_HOME

    def apply(self, session: ToolSession, argument: str | None, shown: str) -> dict[str, Any]:
        if argument is None or not argument.strip():
            return feedback(shown, False, EMPTY_ARGUMENT, MSG_EMPTY_NOTE)
        notes: list[str] = session.tool_state(self.name).setdefault("notes", [])
        notes.append(argument.strip())
        return feedback(shown, True, EXECUTED, MSG_NOTED + argument.strip())


NOTE = NoteTool()

# The files adding ``note`` touched: this module and the one registry line. Nothing in src/ changes (no session
# method, no observation code, no description table, no name list): the page's tool list, the whole-episode list,
# ``tool_names()``, the session's dispatch, the validator, OpenEnv's model and TRL's environment class read
# :data:`shopsimrl.env.tools.TOOLS`.
FILES_TOUCHED = ("tests/note_tool.py", "TOOLS.append(NOTE): one line where the tool is registered")
