"""Every option of every command has a description and shows its default (issue 28 item 5)."""

from __future__ import annotations

import argparse

import pytest

from shopsimrl.cli import DESCRIPTION, build_parser, parsers

SKIPPED = (argparse._HelpAction, argparse._SubParsersAction)


def _options():
    for parser in parsers(build_parser()):
        for action in parser._actions:
            if not isinstance(action, SKIPPED):
                yield parser, action


@pytest.mark.parametrize(("parser", "action"), list(_options()),
                         ids=lambda value: getattr(value, "prog", None) or "/".join(value.option_strings or [value.dest]))
def test_every_option_has_a_description_and_its_default(parser, action):
    name = "/".join(action.option_strings) or action.dest
    assert action.help and action.help.strip(), f"{parser.prog} {name} has no description"
    text = parser.formatter_class(parser.prog)._get_help_string(action)
    if action.default not in (None, False, [], argparse.SUPPRESS) and action.option_strings:
        assert "default" in text, f"{parser.prog} {name} does not show its default {action.default!r}"
    # the help renders (a stray % in a help text breaks --help)
    assert parser.format_help()


def test_the_tree_is_walked_whole():
    progs = {parser.prog for parser in parsers(build_parser())}
    assert {"shopsimrl data prepare", "shopsimrl eval", "shopsimrl serve", "shopsimrl serve-openenv",
            "shopsimrl policy-server", "shopsimrl report"} <= progs


def test_top_level_description_is_one_plain_sentence():
    assert DESCRIPTION.count(".") == 1 and DESCRIPTION.endswith(".") and "``" not in DESCRIPTION
    assert build_parser().description == DESCRIPTION
