"""Action extraction and parsing (docs/contract.md#action-strings, acceptance cases 62–65) and the docs/contract.md#step-checks feedback vocabulary."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsimrl.contract import (
    EXECUTED,
    INCOMPLETE_OPTIONS,
    INVALID_FORMAT,
    MULTIPLE_ACTIONS,
    ParsedAction,
    extract_action,
    parse_action,
)
from shopsimrl.env._actions import feedback

CHAINED = re.compile(r"\]\s*(?:[,;，；]\s*)?(?:search|click)\s*\[", re.IGNORECASE)


# ---------------------------------------------------------------- extraction (HTTP layer)


def test_accepts_direct_action_label() -> None:  # acceptance case 62
    assert extract_action("Action: search[乳胶枕]") == "search[乳胶枕]"


def test_accepts_thought_action_format_and_whitespace() -> None:  # acceptance case 63
    assert extract_action("Thought: 先搜索。\n  Action : click[buy now]  ") == "click[buy now]"


def test_multiple_action_lines_are_preserved_and_rejected() -> None:  # acceptance case 64
    text = "Action: search[鞋]\nAction: click[buy now]"
    assert extract_action(text) == text
    assert parse_action(extract_action(text)).error_code == MULTIPLE_ACTIONS


def test_literal_backslash_n_becomes_a_newline() -> None:
    assert extract_action("Thought: 想一想\\nAction: click[buy now]") == "click[buy now]"
    assert extract_action("Action: search[a]\\nAction: search[b]") == "Action: search[a]\nAction: search[b]"


def test_action_keyword_is_case_insensitive() -> None:
    assert extract_action("thought\nACTION:search[x]") == "search[x]"


def test_without_action_line_the_stripped_response_is_the_action() -> None:
    assert extract_action("  click[buy now]\n") == "click[buy now]"
    assert extract_action("") == ""


def test_extract_passes_non_strings_through() -> None:
    assert extract_action(None) is None  # type: ignore[arg-type]
    assert parse_action(extract_action(None)).error_message == "动作必须是字符串"  # type: ignore[arg-type]


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("action", "name", "argument"),
    [
        ("search[乳胶枕]", "search", "乳胶枕"),
        ("click[buy now]", "click", "buy now"),
        ("  click[buy now]  ", "click", "buy now"),
        ("SEARCH[x]", "SEARCH", "x"),  # the name is casefolded by the state machine, not here
        ("click [ buy now ]", "click", " buy now "),  # name stripped, argument verbatim
        ("click[Buy Now]", "click", "Buy Now"),
        ("click[尺码=M]", "click", "尺码=M"),
        ("click[a[b]c]", "click", "a[b]c"),  # brackets inside the argument
        ("click[]", "click", ""),
        ("search[ ]", "search", " "),
        ("finish", "finish", None),
        ("search", "search", None),
        ("click[x\r]", "click", "x\r"),
    ],
)
def test_valid_forms(action: str, name: str, argument: str | None) -> None:
    assert parse_action(action) == ParsedAction(name, argument)


@pytest.mark.parametrize(
    ("action", "code", "message"),
    [
        (None, INVALID_FORMAT, "动作必须是字符串"),
        (42, INVALID_FORMAT, "动作必须是字符串"),
        (b"click[x]", INVALID_FORMAT, "动作必须是字符串"),
        ("", INVALID_FORMAT, "动作不能为空"),
        (" \n\t ", INVALID_FORMAT, "动作不能为空"),
        ("finish\nnow", INVALID_FORMAT, "动作格式无效"),
        ("click[黑色] trailing", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("[x]", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("click[x", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("clickx]", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("click[a\nb]", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("cl\nick[a]", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("Thought: x\nAction: click[buy now]", INVALID_FORMAT, "动作必须严格使用 search[...] 或 click[...] 格式"),
        ("click[黑色], click[大号]", MULTIPLE_ACTIONS, "一次调用只能执行一个 search[...] 或 click[...] 动作"),
        ("click[黑色]click[大号]", MULTIPLE_ACTIONS, "一次调用只能执行一个 search[...] 或 click[...] 动作"),
        ("click[黑色] ； search[大号]", MULTIPLE_ACTIONS, "一次调用只能执行一个 search[...] 或 click[...] 动作"),
        ("click[黑色]，CLICK [大号]", MULTIPLE_ACTIONS, "一次调用只能执行一个 search[...] 或 click[...] 动作"),
        ("search[a];\n search[b]", MULTIPLE_ACTIONS, "一次调用只能执行一个 search[...] 或 click[...] 动作"),
        ("Action: a\n action : b", MULTIPLE_ACTIONS, "一次调用只能执行一个 search[...] 或 click[...] 动作"),
    ],
)
def test_errors(action: object, code: str, message: str) -> None:
    parsed = parse_action(action)
    assert (parsed.name, parsed.argument, parsed.error_code, parsed.error_message) == (None, None, code, message)
    assert not parsed.ok


def test_action_parser_rejects_chained_or_trailing_actions() -> None:  # acceptance case 65
    assert parse_action("click[黑色], click[大号]").error_code == MULTIPLE_ACTIONS
    trailing = parse_action("click[黑色] trailing")
    assert trailing.error_code == INVALID_FORMAT and trailing.name is None


def test_a_separator_other_than_the_listed_ones_is_not_a_chain() -> None:
    # "]" + "." + "click[" is not the chained pattern, so it is judged by the NAME[ARG] rule instead.
    assert parse_action("click[a].click[b]") == ParsedAction("click", "a].click[b")


@settings(max_examples=200)
@given(st.text())
def test_parse_never_raises(text: str) -> None:
    parsed = parse_action(text)
    assert parsed.ok == (parsed.error_code is None)
    if parsed.ok:
        assert parsed.name and parsed.name == parsed.name.strip()
    else:
        assert parsed.name is None and parsed.argument is None and parsed.error_message


@settings(max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("ab []\n\r\t,;，；:Aactionsearchclk\\"))))
def test_parse_and_extract_never_raise_on_bracket_soup(text: str) -> None:
    parse_action(text)
    parse_action(extract_action(text))


@settings(max_examples=200)
@given(name=st.sampled_from(["search", "click"]), argument=st.text().filter(lambda x: "\n" not in x))
def test_round_trip(name: str, argument: str) -> None:
    action = f"{name}[{argument}]"
    parsed = parse_action(action)
    if CHAINED.search(action):
        assert parsed.error_code == MULTIPLE_ACTIONS
    else:
        assert parsed == ParsedAction(name, argument)


@settings(max_examples=200)
@given(
    first=st.text(alphabet=st.characters(exclude_characters="[]\n")),
    second=st.text(alphabet=st.characters(exclude_characters="[]\n")),
    names=st.tuples(st.sampled_from(["search", "click", "Search", "CLICK"]), st.sampled_from(["search", "click"])),
    separator=st.sampled_from(["", " ", ",", ", ", " ; ", "，", "；", "\n", ",\n\t"]),
)
def test_chained_actions_are_rejected(first: str, second: str, names: tuple[str, str], separator: str) -> None:
    action = f"{names[0]}[{first}]{separator}{names[1]}[{second}]"
    assert parse_action(action).error_code == MULTIPLE_ACTIONS


# ---------------------------------------------------------------- feedback


def test_feedback_copies_the_missing_axes() -> None:
    missing = ["颜色分类", "尺码"]
    result = feedback("click[buy now]", False, INCOMPLETE_OPTIONS, "购买前还需选择规格轴：颜色分类、尺码",
                      missing_option_axes=missing)
    assert list(result) == ["action", "valid", "reason", "message", "missing_option_axes"]
    missing.append("x")
    assert result["missing_option_axes"] == ["颜色分类", "尺码"]  # a copy, not the caller's list


def test_plain_feedback_has_no_missing_axes_key_by_default() -> None:
    assert "missing_option_axes" not in feedback("x", True, EXECUTED, "点击已执行")


# ---------------------------------------------------------------- linear-time parsing (issue 13 item 1)

REFERENCE_ACTION_LINE = re.compile(r"^\s*Action\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["Action", "action", ":", " ", "\n", "\t", "\r", "x", "ı", "search[a]", "Act"]),
                max_size=30).map("".join))
def test_action_lines_match_the_reference_pattern(text: str) -> None:
    from shopsimrl.contract import action_lines

    assert action_lines(text) == REFERENCE_ACTION_LINE.findall(text)
    assert action_lines(text, limit=2) == REFERENCE_ACTION_LINE.findall(text)[:2]


def _best_time(function, argument, repeats: int = 5) -> float:
    import time

    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function(argument)
        best = min(best, time.perf_counter() - started)
    return best


ADVERSARIAL_ACTION_TEXT = {
    "newlines": lambda n: "\n" * n,
    "indented newlines": lambda n: " \n" * (n // 2),
    "unfinished labels": lambda n: "\n Action" * (n // 8),
    "colons without content": lambda n: "Action:\n" * (n // 8),
    "chained brackets": lambda n: "] " * (n // 2),
    "short lines": lambda n: " \nx" * (n // 3),
    "labels mid-line": lambda n: "x Action: y\n" * (n // 12),
}


@pytest.mark.parametrize("shape", sorted(ADVERSARIAL_ACTION_TEXT))
def test_action_parsing_time_grows_linearly(shape: str) -> None:
    """8x the input may cost at most ~3x the linear expectation (a quadratic parser costs 64x)."""
    make = ADVERSARIAL_ACTION_TEXT[shape]

    def both(text: str) -> None:
        parse_action(extract_action(text))

    small, large = make(4_000), make(32_000)
    ratio = _best_time(both, large) / max(_best_time(both, small), 1e-6)
    assert ratio < 24, f"{shape}: 8x the input took {ratio:.1f}x the time"


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["\n", " ", "\t", "Action", ":", "x", "]", "search[", ",", "[", "click"]),
                min_size=1, max_size=6).map("".join))
def test_any_repeated_unit_parses_in_linear_time(unit: str) -> None:
    """Whatever short unit is repeated, 8x the text costs at most ~3x the linear expectation."""
    def both(text: str) -> None:
        parse_action(extract_action(text))

    repeats = max(1, 4_000 // len(unit))
    small, large = unit * repeats, unit * repeats * 8
    ratio = _best_time(both, large) / max(_best_time(both, small), 50e-6)
    assert ratio < 24, f"{unit!r}: 8x the input took {ratio:.1f}x the time"
