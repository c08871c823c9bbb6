"""Every option of every command has a description and shows its actual default (issue 28 item 5, issue 45
item 6); ``--data`` means the same on every command."""

from __future__ import annotations

import argparse
import re

import pytest

from shopsimrl.cli import DESCRIPTION, build_parser, no_default, parsers
from shopsimrl.cli_data import DATA_HELP
from shopsimrl.train.commands import NONE_MEANS, PRESET_NAMES
from shopsimrl.train.cpu_demo_config import RecipeConfig
from shopsimrl.train.cpu_demo_run import config_from_args

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
    text = parser.formatter_class(parser.prog)._get_help_string(action) % {**vars(action), "prog": parser.prog}
    if not no_default(action.default) and action.option_strings:
        assert "default" in text, f"{parser.prog} {name} does not show its default {action.default!r}"
        assert any(form in text for form in _spellings(action.default)), \
            f"{parser.prog} {name}: its default {action.default!r} is not in {text!r}"
    assert not re.search(r"default: the \w+'s\)", text), f"{parser.prog} {name} defers its default: {text!r}"
    # the help renders (a stray % in a help text breaks --help)
    assert parser.format_help()


def _spellings(value: object) -> set[str]:
    """How a help text may write the default ``value``: 65536, 65_536, 600 for 600.0, 1 MiB for 1048576."""
    forms = {str(value)}
    if isinstance(value, float):
        forms |= {f"{value:g}", *([str(int(value))] if value.is_integer() else [])}
    if isinstance(value, int) and not isinstance(value, bool):
        forms.add(f"{value:_}")
        forms |= {f"{value // size} {unit}" for size, unit in ((1 << 20, "MiB"), (1 << 10, "KiB")) if value % size == 0}
    return forms


def test_every_cpu_demo_knob_states_each_presets_value():
    """Issue 45 item 6: about 20 options said only "(default: the preset's)"; each now names every preset's value,
    checked against the presets as the recipe reads them (config_from_args)."""
    (demo,) = [p for p in parsers(build_parser()) if p.prog == "shopsimrl train cpu-demo"]
    configs = {preset: config_from_args(argparse.Namespace(preset=preset, data="", out="", seed=0, stages=None))
               for preset in PRESET_NAMES}
    knobs = [a for a in demo._actions if a.dest in RecipeConfig.__dataclass_fields__ and a.default is None
             and a.dest not in ("data", "stages")]
    assert len(knobs) >= 20
    for action in knobs:
        stated = re.search(r"\(default: (.*)\)$", action.help or "")
        assert stated, action.help
        text = stated.group(1)
        if text.endswith(" on every preset"):
            said = dict.fromkeys(PRESET_NAMES, text.removesuffix(" on every preset"))
        else:
            said = dict(part.split(" ", 1) for part in text.split(", "))
        assert set(said) == set(PRESET_NAMES), action.help
        for preset, config in configs.items():
            value = getattr(config, action.dest)
            if value is None:
                assert said[preset] == NONE_MEANS[action.dest], (action.dest, preset, said[preset])
            elif isinstance(value, bool):
                assert said[preset] == ("on" if value else "off"), (action.dest, preset, said[preset])
            else:
                assert type(value)(said[preset]) == value, (action.dest, preset, said[preset], value)


def test_data_means_the_same_on_every_command():
    """Issue 45 item 6: --data (or a data command's DIR) is the user-cache default catalog unless given (train
    cpu-demo defaulted to data/default, data search required DIR); build-default writes that same catalog."""
    seen = []
    for parser in parsers(build_parser()):
        for action in parser._actions:
            if action.dest == "data" or (action.dest == "dir" and parser.prog.startswith("shopsimrl data ")):
                seen.append(parser.prog)
                assert action.default is None and action.help == DATA_HELP, (parser.prog, action.default)
    assert {"shopsimrl eval", "shopsimrl serve", "shopsimrl train cpu-demo", "shopsimrl data search",
            "shopsimrl data stats", "shopsimrl policy-server", "shopsimrl serve-openenv"} <= set(seen)
    (build,) = [p for p in parsers(build_parser()) if p.prog == "shopsimrl data build-default"]
    (out,) = [a for a in build._actions if a.dest == "out"]
    assert out.default is None and "user cache" in (out.help or "")


def test_the_tree_is_walked_whole():
    progs = {parser.prog for parser in parsers(build_parser())}
    assert {"shopsimrl data prepare", "shopsimrl eval", "shopsimrl serve", "shopsimrl serve-openenv",
            "shopsimrl policy-server", "shopsimrl report"} <= progs


def test_top_level_description_is_one_plain_sentence():
    assert DESCRIPTION.count(".") == 1 and DESCRIPTION.endswith(".") and "``" not in DESCRIPTION
    assert build_parser().description == DESCRIPTION
    search = build_parser().parse_args(["data", "search", "蓝牙耳机"])  # DIR left out: the query is still the query
    assert (search.dir, search.query) == (None, "蓝牙耳机")
