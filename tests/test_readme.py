"""The README and the docs pages cannot drift: their Python snippets run, their shell examples run or at least
parse, and no relative link is dead.

* The pages are README.md and every ``docs/*.md``.
* Every ```python block of a page runs, in order and in one namespace per page, on a small generated catalog
  built like the default one (``data/default`` is replaced by its directory); a page whose snippets cannot run
  here is listed in ``PYTHON_NOT_RUN`` with the reason.
* Every ``shopsimrl …`` line of a ```bash block is checked against the real argument parser: the
  subcommand exists and each ``--flag`` it shows is an option of that subcommand.
* The lines that need no server, no model and no full-scale catalog also run: placeholders (``DIR``,
  ``QUERY``) are filled in, optional ``[…]`` groups dropped, paths moved to the fixture and a temporary
  folder. The others are listed in ``NOT_RUN`` with the reason; a new example must run or be listed.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from shopsimrl.catalog import PrepareOptions
from shopsimrl.cli import build_parser, main
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_NOT_RUN = {
    "docs/training.md": "downloads a 4B model and needs TRL's vLLM server (tests/test_train_trl.py runs the same calls)",
}

# line prefix → why the test does not run it (it is still checked against the parser)
NOT_RUN = {
    "shopsimrl train cpu-demo": "a 40-minute CPU training run (tests/test_train_cpu_demo.py runs the same stages)",
    "shopsimrl data prepare --archive PATH": "needs a full-size archive for the default split sizes",
    "shopsimrl data generate": "writes a full-scale archive (~12 s); tests/test_generate.py covers it",
    "shopsimrl data build-default": "builds the full default catalog (~40 s); make run covers it",
    "shopsimrl serve": "a server",
    "shopsimrl eval --data data/default --split test --base-url": "needs a model endpoint",
    "shopsimrl compare runs/heuristic-test runs/qwen3-test": "needs the model run above",
    "shopsimrl report runs/qwen3-test": "needs the model run above",
    "shopsimrl policy-server": "a server",
    "shopsimrl eval --data data/default --shopper llm": "needs a shopper model endpoint",
    "shopsimrl eval --data data/default --shopper rule --base-url": "needs the policy server above",
    "shopsimrl serve-openenv": "a server, in .venv-openenv (tests/test_openenv.py runs it)",
    "shopsimrl eval --policy heuristic --split test --scenarios": "no --data: the cached full default catalog "
                                                                 "(tests/test_eval_scenarios.py runs scenarios)",
    "shopsimrl eval --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B --scenarios": "needs a model endpoint",
    "shopsimrl eval --data data/default --split train --policy oracle --ray": "starts Ray (tests/test_eval_ray.py)",
    "shopsimrl eval --data /shared/data/default": "a Ray cluster and a model endpoint",
    "shopsimrl eval --data data/default --split train --base-url": "needs a model endpoint",
    "shopsimrl export-sft runs/strong-train": "needs the model run above (tests/test_train_sft.py exports)",
    "shopsimrl eval --policy heuristic --split test": "builds the full default catalog in the user cache on first "
                                                      "use; tests/test_wheel_first_use.py runs it from a wheel",
}


@pytest.fixture(scope="module")
def small_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default catalog's generator and pipeline at 600 products (a few seconds)."""
    out = tmp_path_factory.mktemp("readme") / "default"
    build_default_catalog(out, config=GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150),
                          options=PrepareOptions(test_size=30, val_size=30))
    return out


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _blocks(language: str, page: Path | None = None) -> list[str]:
    pages = [page] if page is not None else PAGES
    return [block for each in pages
            for block in re.findall(rf"^```{language}\n(.*?)^```", each.read_text("utf-8"), flags=re.M | re.S)]


def _shell_lines() -> list[str]:
    lines = []
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()  # a trailing comment
            if line.startswith("shopsimrl "):
                lines.append(re.sub(r"\s+", " ", line))
    return lines


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the subcommand that ``words`` name, and the words after the subcommand."""
    while words:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or words[0] not in actions[0].choices:
            break
        parser, words = actions[0].choices[words[0]], words[1:]
    return parser, words


def test_readme_has_examples():
    assert len(_blocks("python", ROOT / "docs" / "python.md")) >= 1 and len(_blocks("python")) >= 3
    assert len(_blocks("bash", README)) >= 2 and len(_shell_lines()) >= 10


@pytest.mark.parametrize("line", _shell_lines())
def test_shell_example_flags_exist(line):
    words = shlex.split(line.replace("[", " ").replace("]", " "))[1:]
    parser, rest = _subparser(build_parser(), words)
    assert parser.prog != "shopsimrl", f"no such subcommand in {line!r}"
    known = {option for action in parser._actions for option in action.option_strings}
    flags = {word for word in rest if word.startswith("--")}
    assert flags <= known, f"{line!r}: unknown flags {sorted(flags - known)} for `{parser.prog}`"


def test_every_shell_example_runs_or_says_why_not():
    listed = [line for line in _shell_lines() if any(line.startswith(prefix) for prefix in NOT_RUN)]
    assert all(any(line.startswith(prefix) for line in _shell_lines()) for prefix in NOT_RUN), \
        "NOT_RUN names an example the README no longer has"
    assert len(listed) < len(_shell_lines())


def _runnable(line: str, data: Path, runs: Path) -> list[str]:
    line = re.sub(r"\[[^\[\]]*\]", "", line)  # optional groups
    words = shlex.split(line)[1:]
    fill = {"DIR": str(data), "QUERY": "小吃车", "data/default": str(data)}
    out = []
    for word in words:
        word = fill.get(word, word)
        if word.startswith("runs/"):
            word = str(runs / word[len("runs/"):])
        out.append(word)
    return out


def test_shell_examples_that_need_no_server_run(small_default, tmp_path, capsys):
    ran = []
    for line in _shell_lines():
        if any(line.startswith(prefix) for prefix in NOT_RUN):
            continue
        argv = _runnable(line, small_default, tmp_path / "runs")
        if argv[:2] == ["data", "stats"]:
            argv += ["--workers", "1", "--oracle-sample", "4"]  # keep the fixture run short
        if argv[0] == "eval":
            argv.append("--no-progress")
        assert main(argv) == 0, f"README example failed: {line!r} → {argv}"
        ran.append(argv[:2])
    assert ["data", "search"] in ran and ["eval", "--data"] in ran
    assert (tmp_path / "runs" / "heuristic-test" / "summary.json").is_file()
    capsys.readouterr()


def test_python_snippets_run_on_a_generated_catalog(small_default, capsys):
    from shopsimrl import ShopEnv

    # as in the full default catalog, task 0 is a standard task: an example must not reset it in persona mode
    assert not ShopEnv.from_data_dir(small_default).world.catalog.goal(0).get("user_persona")
    ran = {}
    for page in PAGES:
        blocks = _blocks("python", page)
        if not blocks or _name(page) in PYTHON_NOT_RUN:
            continue
        namespace: dict = {"__name__": "readme"}
        for block in blocks:
            exec(compile(block.replace('"data/default"', repr(str(small_default))), str(page), "exec"), namespace)
        ran[_name(page)] = namespace
    assert ran["docs/python.md"]["reset"]["task_mode"] == "persona" and ran["docs/python.md"]["env"].done
    assert {"docs/python.md", "docs/dialogue.md"} <= set(ran)
    assert all(any(_name(page) == name for page in PAGES) for name in PYTHON_NOT_RUN), "PYTHON_NOT_RUN names no page"
    assert capsys.readouterr().out


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text("utf-8"), flags=re.M | re.S)
    found = {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"', text))


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text("utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_relative_link_is_dead(page):
    """Every relative link (and image) of the README and the docs pages names a file that exists and, for a
    Markdown page with a #fragment, a heading or anchor that page has."""
    dead = []
    for link in _links(page):
        if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            dead.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in _anchors(target):
            dead.append(f"{link} (no such anchor in {_name(target)})")
    assert not dead, f"{_name(page)}: {dead}"


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[gone](missing.md) [here](#title) [nowhere](#no-such)\n", "utf-8")
    assert _links(page) == ["missing.md", "#title", "#no-such"] and "title" in _anchors(page)
    assert not (tmp_path / "missing.md").exists() and "no-such" not in _anchors(page)


def test_the_readme_is_one_screen_and_links_every_docs_page():
    """Issue 45 item 7: the first screen says what it is, the two commands, the first eval and where to go next;
    the rest lives in the docs pages."""
    text = README.read_text("utf-8")
    lines = text.splitlines()
    assert len(lines) <= 60
    first = "\n".join(lines[:50])
    for needed in ("deterministic, local simulator", "make run", "make test",
                   "shopsimrl eval --policy heuristic --split test", "37.00%", "## Where next"):
        assert needed in first, f"the README's first screen lacks {needed!r}"
    linked = {link.partition("#")[0] for link in _links(README)}
    for page in PAGES[1:]:
        if page.name != "index.md":
            assert f"docs/{page.name}" in linked, f"README does not link docs/{page.name}"
    for image in ("docs/images/agent-view.png", "docs/images/report-categories.png"):
        assert image in linked and (ROOT / image).stat().st_size > 1000
