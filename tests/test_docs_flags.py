"""Every flag the README and docs pages pass to a project command exists in that command's parser (issue 45
item 3: docs/training.md told the reader to pass ``--vllm-url`` to ``examples/trl/train_grpo.py``, whose flag is
``--vllm-server``).

The commands are found in fenced code blocks (one shell command per line, ``\\`` continuations joined), in inline
code spans (```shopsimrl eval --split test```, ```bench_scale.py --scales 1,10```, ```eval --shopper rule```) and
in the sentence form "pass ```--flag``` to ```script```". ``shopsimrl`` flags are checked against the subcommand's
own argparse parser; a script's against the options its real ``--help`` prints (or, for a script whose imports
need a side venv, its source's ``add_argument`` calls).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from shopsimrl.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPT_DIRS = ("examples", "benchmarks", "scripts")
SHELL_BREAKS = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "<"}
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")
PASS_TO = re.compile(r"pass(?:es|ing)? `(--[^`]+)` to `([^`]+)`")


def _subcommands(parser) -> dict:
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return dict(action.choices)
    return {}


TOP = build_parser()
TOP_COMMANDS = set(_subcommands(TOP))


def _script(token: str) -> str | None:
    """The repository path of a project script named by ``token`` (``benchmarks/bench_x.py``, ``bench_x.py``)."""
    token = token.removeprefix("./")
    for folder in SCRIPT_DIRS:
        if token.startswith(f"{folder}/") and token.endswith(".py") and (ROOT / token).is_file():
            return token
    if re.fullmatch(r"[a-z_]+\.py", token) and (ROOT / "benchmarks" / token).is_file():
        return f"benchmarks/{token}"
    return None


def _words(command: str) -> list[str]:
    text = re.sub(r"\s#.*$", "", command, flags=re.M).replace("[", " ").replace("]", " ")
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote in a fragment: split on spaces
        return text.split()


def _calls(command: str, *, bare_subcommand: bool = False) -> Iterator[tuple[str, list[str]]]:
    """(target, flags) for each project command in one shell command line; target is ``shopsimrl <sub…>``
    or a script path. ``bare_subcommand``: an inline span may start at the subcommand (``eval --split``)."""
    words = _words(command)
    start = 0
    while start < len(words):
        word = words[start]
        target = None
        if word == "shopsimrl" or word.endswith("/shopsimrl") or word == "shopsimrl.cli":
            rest, parser, names = words[start + 1:], TOP, ["shopsimrl"]
        elif bare_subcommand and start == 0 and word in TOP_COMMANDS:
            rest, parser, names = words, TOP, ["shopsimrl"]
        else:
            target = _script(word)
            if target is None:
                start += 1
                continue
            rest, parser, names = words[start + 1:], None, []
        used = 0
        if parser is not None:
            while used < len(rest) and rest[used] in _subcommands(parser):
                parser = _subcommands(parser)[rest[used]]
                names.append(rest[used])
                used += 1
            target = " ".join(names)
        flags = []
        for token in rest[used:]:
            if token in SHELL_BREAKS:
                break
            if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", token):
                flags.append(token.split("=", 1)[0])
            used += 1
        assert target is not None
        yield target, flags
        start += 1 + used


def _doc_calls() -> Iterator[tuple[str, str, str, list[str]]]:
    """(page, the text quoted, target, flags) over every page."""
    for page in PAGES:
        text = page.read_text("utf-8")
        for block in FENCE.findall(text):
            for line in block.replace("\\\n", " ").splitlines():
                for target, flags in _calls(line.strip().removeprefix("$ ")):
                    yield page.name, line.strip(), target, flags
        prose = FENCE.sub("", text)
        for span in SPAN.findall(prose):
            for target, flags in _calls(" ".join(span.split()), bare_subcommand=True):
                yield page.name, span, target, flags
        for flags, target in PASS_TO.findall(" ".join(prose.split())):
            for name, _ in _calls(target, bare_subcommand=True):
                yield page.name, f"pass `{flags}` to `{target}`", name, [w for w in flags.split() if w.startswith("--")]


@cache
def _script_options(path: str) -> frozenset[str]:
    """The options the script's own parser accepts, as its ``--help`` prints them."""
    env = os.environ | {"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, str(ROOT / path), "--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0 and "ModuleNotFoundError" in done.stderr:  # needs a side venv (openenv): its source
        return _declared_options(ROOT / path)
    assert done.returncode == 0, f"{path} --help failed: {done.stderr[-2000:]}"
    return frozenset(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", done.stdout))


def _declared_options(path: Path) -> frozenset[str]:
    """The ``--options`` of every ``add_argument`` call in the script's source."""
    tree = ast.parse(path.read_text("utf-8"))
    return frozenset(arg.value for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"
                     for arg in node.args if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"))


def _command_options(target: str) -> frozenset[str]:
    parser = TOP
    for name in target.split()[1:]:
        parser = _subcommands(parser)[name]
    return frozenset(option for action in parser._actions for option in action.option_strings)


CALLS = list(_doc_calls())


def test_the_docs_name_the_project_commands_they_are_read_for():
    """The extraction finds what it must (else the test below would pass on nothing)."""
    targets = {target for _, _, target, _ in CALLS}
    assert {"shopsimrl eval", "shopsimrl serve", "shopsimrl train cpu-demo", "examples/trl/train_grpo.py",
            "examples/verl/build_tasks.py", "benchmarks/bench_scale.py"} <= targets
    assert sum(len(flags) for _, _, _, flags in CALLS) > 200
    assert ("training.md", "pass `--vllm-server` to `examples/trl/train_grpo.py`", "examples/trl/train_grpo.py",
            ["--vllm-server"]) in CALLS  # the sentence that said --vllm-url


def test_every_flag_the_docs_pass_exists():
    scripts = sorted({target for _, _, target, _ in CALLS if not target.startswith("shopsimrl")})
    with ThreadPoolExecutor(max_workers=2) as pool:
        options = dict(zip(scripts, pool.map(_script_options, scripts), strict=True))
    wrong = []
    for page, quoted, target, flags in CALLS:
        known = options[target] if target in options else _command_options(target)
        wrong += [f"{page}: {flag} is not an option of {target} (in {quoted!r})"
                  for flag in flags if flag not in known and flag != "--help"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("line", "expected"), [
    ("shopsimrl serve --data d [--port 5700] | tee log", [("shopsimrl serve", ["--data", "--port"])]),
    ("python benchmarks/bench_scale.py --scales=1,10 && shopsimrl data stats --json",
     [("benchmarks/bench_scale.py", ["--scales"]), ("shopsimrl data stats", ["--json"])]),
    ("accelerate launch --num-processes 8 examples/trl/train_grpo.py --model m  # --not-this",
     [("examples/trl/train_grpo.py", ["--model"])]),
])
def test_the_extraction_reads_a_shell_line(line, expected):
    assert list(_calls(line)) == expected
