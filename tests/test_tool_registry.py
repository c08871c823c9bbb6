"""One object per tool (issue 23 item 2): every view of a tool derives from its :class:`Tool`, and a new tool is
its own object plus one registry line.

The registry tests walk every registered tool; the extension test registers a tool the project does not have
(``note``, ``tests/note_tool.py``: it records a note through the session's general ``tool_state`` primitive) and
checks that each path picks it up with no other change: the session's dispatch, feedback and state, the per-page
and whole-episode lists, the tool names, the validator (its ``maxLength`` comes from the
schema), the action reading and TRL's environment class. The files it touched: ``tests/note_tool.py`` and one
registry line (``FILES_TOUCHED``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from note_tool import FILES_TOUCHED, NOTE
from shopsimrl.agent.validation import interpret
from shopsimrl.contract import EMPTY_ARGUMENT, EXECUTED, SEARCH_HOME
from shopsimrl.env import ShopWorld
from shopsimrl.env.tools import (
    TOOLS,
    Tool,
    action_of_call,
    episode_tools,
    tool_named,
    tool_names,
    tools_for_state,
)

DIALOGUE_STATE = {"search_available": True, "actions": ["back to search"], "dialogue": {"ask_user_available": True}}


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_each_tool_derives_its_page_and_episode_schemas(tool: Tool) -> None:
    assert tool.offered(DIALOGUE_STATE) and tool_named(tool.name) is tool
    page = tool.schema(DIALOGUE_STATE)["function"]
    whole = tool.episode_schema()["function"]
    assert (page["name"], page["description"]) == (whole["name"], whole["description"]) == (tool.name,
                                                                                             tool.description)
    for parameters in (page["parameters"], whole["parameters"], tool.parameters()):
        assert parameters["required"] == [tool.argument] and list(parameters["properties"]) == [tool.argument]
        assert parameters["additionalProperties"] is False
    argument = whole["parameters"]["properties"][tool.argument]
    assert set(argument) == {"type", "description"}  # no per-page enum or bounds in the whole-episode list
    assert "enum" not in tool.parameters()["properties"][tool.argument]  # the validator leaves the enum to the env
    assert tool.feedback_codes and EXECUTED in tool.feedback_codes
    assert tool.episode_schema() in episode_tools(dialogue=True)
    assert (tool.episode_schema() in episode_tools()) is not tool.dialogue_only


def test_trls_schemas_are_the_episode_schemas() -> None:
    from transformers.utils import get_json_schema

    from shopsimrl.train.trl_environment import ShopDialogueToolEnvironment, ShopToolEnvironment

    for cls, dialogue in ((ShopToolEnvironment, False), (ShopDialogueToolEnvironment, True)):
        for schema in episode_tools(dialogue=dialogue):
            function = schema["function"]
            built = get_json_schema(getattr(cls, function["name"]))["function"]
            assert (built["name"], built["description"]) == (function["name"], function["description"])
            assert built["parameters"]["properties"] == function["parameters"]["properties"]
            assert built["parameters"]["required"] == function["parameters"]["required"]
    assert not hasattr(ShopToolEnvironment, "ask_user")


# ------------------------------------------------------------------------------- adding a tool


@pytest.fixture
def note() -> Iterator[Tool]:
    TOOLS.append(NOTE)  # the one registry line
    try:
        yield NOTE
    finally:
        TOOLS.remove(NOTE)


def _reply(name: str, arguments: dict[str, str]) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    message = {"content": None, "tool_calls": [call]}
    return {"id": "r", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def test_a_new_tool_is_its_own_object_plus_one_registry_line(world: ShopWorld, note: Tool) -> None:
    env = world.new_env()
    task_id = world.catalog.split("test")[0]
    env.reset(task_id)
    tools = env.tools()
    assert [tool["function"]["name"] for tool in tools] == ["search", "note"]  # offered by its own rule
    assert note.episode_schema() in episode_tools()

    accepted = interpret(_reply("note", {"text": "便宜点"}), tools)  # the validator reads the schema
    assert accepted.accepted and accepted.canonical_action() == "note[便宜点]"
    too_long = interpret(_reply("note", {"text": "九个字九个字九个字"}), tools)
    assert too_long.protocol_error == {"code": "invalid_tool_arguments", "message": "note.text must be at most 8 characters"}
    assert interpret(_reply("note", {"txt": "x"}), tools).protocol_error["code"] == "invalid_tool_arguments"
    assert action_of_call("note", {"text": "x"}) == "note[x]"

    result = env.step(accepted.canonical_action())  # the session dispatches to the tool's own apply
    assert result["action_feedback"] == {"action": "note[便宜点]", "valid": True, "reason": EXECUTED,
                                         "message": "记下了：便宜点"}
    assert env.step("note[ ]")["action_feedback"]["reason"] == EMPTY_ARGUMENT
    assert result["observation_state"]["page_type"] == SEARCH_HOME
    assert env.step("note[再看看]")["action_feedback"]["valid"]
    assert env.session is not None and env.session.tool_state("note") == {"notes": ["便宜点", "再看看"]}  # its change
    assert tool_names() == ("search", "click", "ask_user", "note")  # the contract's names come from the registry
    assert [tool.name for tool in TOOLS[-1:]] == ["note"] and len(FILES_TOUCHED) == 2

    from shopsimrl.train.trl_environment import ShopToolEnvironment

    class WithNote(ShopToolEnvironment):  # TRL's class installs the registry's tools
        pass

    trl_env = WithNote(world)
    trl_env.reset(task_id=task_id)
    assert "记下了：hi" in trl_env.note(text="hi")
    assert trl_env._env is not None and trl_env._env.session.tool_state("note") == {"notes": ["hi"]}
    with pytest.raises(TypeError):
        trl_env.note(txt="hi")


def test_without_the_registry_line_the_tool_does_not_exist(world: ShopWorld) -> None:
    env = world.new_env()
    env.reset(world.catalog.split("test")[0])
    assert [tool["function"]["name"] for tool in env.tools()] == ["search"]
    assert env.step("note[x]")["action_feedback"]["reason"] == "invalid_format"
    assert tools_for_state({"page_type": SEARCH_HOME, "search_available": False, "actions": []}) == []
