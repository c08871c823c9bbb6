"""The contract vocabulary is defined once (``shopsimrl.contract``, issue 12 item 3) and means what the contract says.

The scan reads every Python file of the package and of ``environments/`` as a syntax tree, so docstrings and
comments may quote the words freely; a string literal in code that spells a contract word anywhere but the
vocabulary module is a second definition and fails the test.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import shopsimrl.contract as contract
from error_kinds import raises_kind
from shopsimrl.contract import (
    ASK_USER_TOOL,
    PAGE_TOOL_NAMES,
    ParsedAction,
    action_argument,
    check_task_id,
    extract_action,
    format_action,
    parse_action,
    visible_instruction,
)
from shopsimrl.env.tools import action_of_call, argument_key, tool_names
from shopsimrl.errors import RequestError, ShopSimError

TOOL_NAMES = tool_names()  # the registry's, in its order

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "shopsimrl"
VOCABULARY = PACKAGE / "contract.py"
RENDERER = PACKAGE / "env" / "_observation.py"  # the page text's own words: its renderer and reader
SCANNED = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "environments").rglob("*.py")])

# Literals that name a contract word and nothing else in this code base.
WORDS = {
    "back to search", "< prev", "next >", "buy now",                                   # button labels
    "action_limit", "generation_length",                                               # termination reasons
    "single_turn", "multi_turn",                                                       # interaction modes
    "search_home", "search_results", "product_detail", "information_subpage",          # page types
    "ask_user",                                                                        # the dialogue tool
    "未提供",                                                                          # a missing value
    "task idx must be an integer",                                                     # the task-id check
    "Continue interaction", "Invalid action", "Episode terminated: ",                   # result messages
}
# The page text's structure: private to its renderer, which also reads it back (nothing else parses page text).
PAGE_TEXT_WORDS = {
    "页面：搜索首页", "页面：搜索结果", "页面：商品详情", "页面：商品属性页", "页面：任务已终止",  # page headings
    "- 支持商品搜索", "- 可以使用 ask_user 向顾客提问", "对话：",                           # capability lines
    "商品列表：", "商品：", "规格选择：", "上次交互结果：", "页面能力：", "可点击元素：",        # section headings
    "搜索词：", "结果：第 ", "- 结果：", "- 说明：", "  可选值：", "已选择 ", "仍需选择：", "- 此商品没有规格选项",
}
# The start of a canonical action written by hand (``f"search[{q}]"``); messages quote ``search[...]`` instead.
ACTION_PREFIXES = tuple(f"{name}[" for name in TOOL_NAMES)
# (file, literal): the same characters meaning something else there.
ALLOWED = {
    ("dialogue/lexicon.py", "buy now"): "a phrase the shopper recognises in a question, not the button",
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip]


def _is_contract_word(value: str) -> bool:
    if value in WORDS:
        return True
    return value.startswith(ACTION_PREFIXES) and "[...]" not in value


def test_the_scan_sees_the_package_and_the_vocabulary():
    assert VOCABULARY in SCANNED and RENDERER in SCANNED and len(SCANNED) > 100
    found = {value for _, value in _literals(VOCABULARY) if _is_contract_word(value)}
    assert found >= WORDS, f"the vocabulary no longer spells {sorted(WORDS - found)}: update WORDS"
    assert not PAGE_TEXT_WORDS & {value for _, value in _literals(VOCABULARY)}, "page-text words left in contract"
    page_words = {value for _, value in _literals(RENDERER)} & PAGE_TEXT_WORDS
    assert page_words == PAGE_TEXT_WORDS, f"the renderer no longer spells {sorted(PAGE_TEXT_WORDS - page_words)}"


@pytest.mark.parametrize("path", [p for p in SCANNED if p != VOCABULARY],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_contract_words_are_spelled_only_in_the_vocabulary(path):
    relative = str(path.relative_to(PACKAGE)) if path.is_relative_to(PACKAGE) else str(path.relative_to(ROOT))
    copies = [f"line {line}: {value!r}" for line, value in _literals(path)
              if _is_contract_word(value) and (relative, value) not in ALLOWED]
    assert not copies, f"{relative} spells contract words itself; import them from shopsimrl.contract: {copies}"
    if path != RENDERER:
        page_text = [f"line {line}: {value!r}" for line, value in _literals(path) if value in PAGE_TEXT_WORDS]
        assert not page_text, f"{relative} spells page-text words: read the state, not the text: {page_text}"


def test_the_scan_would_catch_a_copy(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Docstrings may say back to search."""\nBUY = "buy now"\nACTION = f"click[{BUY}]"\n',
                     encoding="utf-8")
    assert [value for _, value in _literals(probe) if _is_contract_word(value)] == ["buy now", "click["]


# ------------------------------------------------------------------------------- one definition, many names


def test_old_import_paths_are_the_same_objects():
    from shopsimrl.agent import turn, validation
    from shopsimrl.agent.policies import heuristic, oracle
    from shopsimrl.env import _actions as actions
    from shopsimrl.env import _state as state
    from shopsimrl.env import interface, tools
    from shopsimrl.server import models

    assert interface.TERMINATION_REASONS is contract.TERMINATION_REASONS
    assert interface.INTERACTION_MODES is contract.INTERACTION_MODES
    assert interface.END_REASONS is contract.END_REASONS
    assert interface.TerminationReason is contract.TerminationReason is models.TerminationReason
    assert interface.InteractionMode is contract.InteractionMode is models.InteractionMode
    assert state.BUTTON_LABELS is contract.BUTTON_LABELS and state.PAGE_TYPES is contract.PAGE_TYPES
    assert not hasattr(actions, "parse_action")  # the action grammar has one import path: shopsimrl.contract
    assert turn.ACTION_LIMIT == contract.ACTION_LIMIT and validation.GENERATION_LENGTH == contract.GENERATION_LENGTH
    assert tools.SEARCH_TOOL == contract.SEARCH_TOOL and tools.ASK_USER_TOOL == contract.ASK_USER_TOOL
    assert (heuristic.BACK, heuristic.NEXT, heuristic.PREV, heuristic.BUY) == (oracle.BACK, oracle.NEXT, oracle.PREV,
                                                                              oracle.BUY)


@pytest.mark.parametrize(("literal", "values"), [
    (contract.PageType, sorted(contract.PAGE_TYPES)),
    (contract.InteractionMode, list(contract.INTERACTION_MODES)),
    (contract.TaskMode, list(contract.TASK_MODES)),
    (contract.TerminationReason, list(contract.TERMINATION_REASONS)),
    (contract.EndReason, list(contract.END_REASONS)),
    (contract.PageToolName, list(contract.PAGE_TOOL_NAMES)),
])
def test_each_literal_type_names_exactly_its_constants(literal, values):
    assert sorted(typing.get_args(literal)) == sorted(values)


def test_the_vocabulary_agrees_with_the_engine():
    from shopsimrl.env._observation import home_state, terminal_state
    from shopsimrl.env.tools import tools_for_state
    from shopsimrl.versions import EPISODE_LIMITS

    assert tuple(EPISODE_LIMITS) == contract.INTERACTION_MODES
    assert home_state()["page_type"] == contract.SEARCH_HOME and terminal_state()["page_type"] == contract.TERMINAL
    state = {"search_available": True, "actions": [contract.BACK_TO_SEARCH],
             "dialogue": {"ask_user_available": True}}
    tools = tools_for_state(state)
    assert [tool["function"]["name"] for tool in tools] == list(TOOL_NAMES) == ["search", "click", "ask_user"]
    for tool in tools:
        name = tool["function"]["name"]
        assert tool["function"]["parameters"]["required"] == [argument_key(name)]


# ------------------------------------------------------------------------------- action strings

ARGUMENT = st.text(alphabet=st.characters(exclude_characters="[]\n\r\\", exclude_categories=("Cs",)), max_size=40)


@given(name=st.sampled_from(TOOL_NAMES), argument=ARGUMENT)
def test_format_and_parse_are_inverse(name, argument):
    action = format_action(name, argument)
    assert parse_action(action) == ParsedAction(name, argument.strip())
    assert action_argument(action, name) == argument.strip()
    assert action_of_call(name, {argument_key(name): argument}) == action
    # a canonical action passes the model-text reading unchanged: reading it on every path changes nothing
    assert extract_action(action) == action


@given(name=st.sampled_from(PAGE_TOOL_NAMES), argument=ARGUMENT)
def test_a_model_answer_gives_the_same_action_as_the_canonical_string(name, argument):
    action = format_action(name, argument)
    assert extract_action(f"Thought: 先想一想。\nAction: {action}") == action
    assert extract_action(f"Thought: 先想一想。\\nAction:   {action}  ") == action


def test_action_of_call_needs_a_known_tool_and_a_string_argument():
    assert action_of_call("search", {"query": " 小吃车 "}) == "search[小吃车]"
    assert action_of_call(ASK_USER_TOOL, {"question": "预算？", "extra": 1}) == "ask_user[预算？]"
    assert action_of_call("checkout", {"value": "x"}) is None
    assert action_of_call("click", {"query": "x"}) is None
    assert action_of_call("click", {"value": 3}) is None
    assert action_of_call(None, {"value": "x"}) is None
    assert action_argument("click[x]", "search") is None and action_argument("search[", "search") is None


def test_option_labels_use_the_separator():
    assert contract.option_label("颜色分类", "黑色") == "颜色分类=黑色"


# ------------------------------------------------------------------------------- rules


@pytest.mark.parametrize("task_id", [True, False, "3", 3.0, None, [1]])
def test_a_task_id_must_be_an_int(task_id):
    with raises_kind(RequestError, "invalid_task_id", match="task idx must be an integer") as caught:
        check_task_id(task_id)
    assert isinstance(caught.value, ShopSimError) and isinstance(caught.value, ValueError)


def test_an_int_task_id_passes():
    assert check_task_id(0) == 0 and check_task_id(-1) == -1  # whether it is a task is the catalog's business


def test_visible_instruction_rule():
    goal = {"instruction_simple": "简化目标", "instruction_text": "完整隐藏目标", "user_persona": {"用户ID": "u"}}
    assert visible_instruction(goal, persona=True) == "简化目标"
    assert visible_instruction(goal, persona=False) == "完整隐藏目标"
    standard = {**goal, "user_persona": {}}
    assert visible_instruction(standard, persona=True) == "完整隐藏目标"  # no persona: the full text
    assert contract.task_mode(True) == "persona" and contract.task_mode(False) == "standard"
