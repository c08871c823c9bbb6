"""The ``eval``, ``compare`` and ``report`` commands end to end on the fixture catalog."""

from __future__ import annotations

import json
import re

import pytest

from shopsimrl.cli import main


def test_eval_compare_and_report(prepared_dir, tmp_path, capsys):
    heuristic, rand = tmp_path / "heuristic", tmp_path / "random"
    assert main(["eval", "--data", str(prepared_dir), "--split", "all", "--policy", "heuristic",
                 "--out", str(heuristic), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "success rate" in out and "reward (r_strict)" in out and f"report:  {heuristic}/report.html" in out
    for name in ("manifest.json", "traces.jsonl", "summary.json", "report.md", "report.html"):
        assert (heuristic / name).is_file(), name
    summary = json.loads((heuristic / "summary.json").read_text())
    assert summary["counts"]["completed"] == summary["counts"]["requested"] == 15
    md = (heuristic / "report.md").read_text()
    for figure in ("components", "terminations", "steps", "categories", "error_rates"):
        assert f"report_figures/{figure}.png" in md and (heuristic / "report_figures" / f"{figure}.png").stat().st_size
    assert "data:image/png;base64," in (heuristic / "report.html").read_text()

    assert main(["eval", "--data", str(prepared_dir), "--split", "all", "--policy", "random", "--out", str(rand),
                 "--no-progress", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["compare", str(rand), str(heuristic), "--resamples", "500", "--out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "success transitions" in out and "r_success" in out
    comparison = json.loads((tmp_path / "c.json").read_text())
    assert comparison["paired_episodes"] == 15 and comparison["alignment"]["differs_in"] == ["model"]
    assert comparison["metrics"]["r_success"]["diff"] > 0  # the heuristic beats random clicks

    assert main(["report", str(heuristic), "--vs", str(rand)]) == 0
    md = (heuristic / "report.md").read_text()
    assert "Paired comparison" in md and (heuristic / "report_figures" / "paired_differences.png").is_file()
    assert json.loads((heuristic / "comparison.json").read_text())["run_a"]["path"] == str(rand)


def test_oracle_is_labelled_as_a_solvability_check(prepared_dir, tmp_path, capsys):
    out_dir = tmp_path / "oracle"
    main(["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "oracle", "--out", str(out_dir),
          "--no-progress"])
    out = capsys.readouterr().out
    assert "oracle (solvability check)" in out and "not a baseline" in out
    assert "Solvability check" in (out_dir / "report.md").read_text()
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert "solvability check" in manifest["plan"]["model"]["note"]


def test_bad_invocations_are_clear_errors(prepared_dir, tmp_path, capsys):
    assert main(["eval", "--data", str(prepared_dir), "--out", str(tmp_path / "x")]) == 2
    assert "choose exactly one" in capsys.readouterr().err
    assert main(["eval", "--data", str(prepared_dir), "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "y")]) == 2
    assert "go together" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "nope"), str(tmp_path / "nope2")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_compare_allow_partial_pairs_a_limited_run_with_the_full_one(prepared_dir, tmp_path, capsys):
    full, short = tmp_path / "full", tmp_path / "short"
    common = ["eval", "--data", str(prepared_dir), "--split", "all", "--no-progress", "--no-report"]
    assert main([*common, "--policy", "heuristic", "--out", str(full)]) == 0
    assert main([*common, "--policy", "random", "--limit", "3", "--out", str(short)]) == 0
    capsys.readouterr()
    assert main(["compare", str(full), str(short)]) == 2
    assert "the job lists differ" in capsys.readouterr().err
    assert main(["compare", str(full), str(short), "--allow-partial", "--resamples", "200", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["paired_episodes"] == 3
    assert any(w.startswith("compared 3 episodes completed in both runs") for w in result["alignment"]["warnings"])
    assert main(["compare", str(short), str(full), "--allow-partial", "--resamples", "200"]) == 0
    assert "compared 3 episodes" in capsys.readouterr().out


def test_report_vs_refuses_a_partial_pair_unless_asked_and_dialogue_policies_need_a_shopper(prepared_dir, tmp_path,
                                                                                           capsys):
    """Issue 28 item 3: `report --vs` pairs like `compare` (--allow-partial to pair a subset); a dialogue
    policy without --shopper is refused with the fix instead of silently running single-turn."""
    full, part = tmp_path / "full", tmp_path / "part"
    assert main(["eval", "--data", str(prepared_dir), "--split", "all", "--policy", "heuristic",
                 "--out", str(full), "--no-progress", "--no-report"]) == 0
    assert main(["eval", "--data", str(prepared_dir), "--split", "all", "--policy", "random", "--limit", "5",
                 "--out", str(part), "--no-progress", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["report", str(full), "--vs", str(part)]) == 2
    assert "allow-partial" in capsys.readouterr().err
    assert not (full / "comparison.json").exists()
    assert main(["report", str(full), "--vs", str(part), "--allow-partial"]) == 0
    assert json.loads((full / "comparison.json").read_text())["paired_episodes"] == 5

    assert main(["eval", "--data", str(prepared_dir), "--split", "all", "--policy", "dialogue-heuristic",
                 "--out", str(tmp_path / "d"), "--no-progress", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "--shopper rule" in err and "--policy heuristic" in err


def test_category_names_are_drawn_with_a_debian_cjk_font(monkeypatch):
    """Issue 28 item 8: the category chart showed #1…#14 when matplotlib's font cache predated the font."""
    from pathlib import Path

    import pytest
    from matplotlib import font_manager

    from shopsimrl.eval.report import CJK_FONT_FILES, CJK_FONTS, _cjk_font

    if not any(Path(path).is_file() for path in CJK_FONT_FILES):
        pytest.skip("no Debian CJK font (make test installs fonts-wqy-microhei)")
    stale = [font for font in font_manager.fontManager.ttflist if font.name not in CJK_FONTS]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)  # a cache built before the font was installed
    assert _cjk_font() in CJK_FONTS


@pytest.mark.parametrize("episodes", [1, 7, 40])
def test_progress_outside_a_terminal_is_whole_lines_every_few_seconds(episodes):
    """Issue 45 item 7: in a pipe rich printed one bar at the end, cut to 80 columns (``1200…``, ``0:0…``); now a
    whole line at the first episode, one per ``every`` seconds (a stepped clock: 1.5 s per episode) and the end."""
    import io

    from rich.console import Console

    from shopsimrl.eval._console import LiveProgress
    from shopsimrl.eval.rundir import TRACE_SCHEMA_VERSION

    ticks = iter(range(10_000))
    stream = io.StringIO()
    label = "a-long-policy-label · persona multi-turn scenario · test"
    progress = LiveProgress(label, console=Console(file=stream, width=40), every=5.0,
                            clock=lambda: 1.5 * next(ticks))
    progress.start(episodes + 2, 2)
    for n in range(episodes):
        progress.record({"schema_version": TRACE_SCHEMA_VERSION, "status": "completed" if n % 3 else "failed",
                         "final": {"done": True, "reward_detail": {"r_success": n % 2}}})
    progress.stop()
    lines = stream.getvalue().splitlines()
    assert lines[0] == f"[shopsimrl] resuming: 2 of {episodes + 2} episodes already completed"
    counts = [int(re.search(r": (\d+)/", line).group(1)) for line in lines[1:]]
    assert counts == sorted(counts) and counts[-1] == 2 + episodes - len(range(0, episodes, 3))
    assert len(lines) - 1 <= 2 + episodes * 1.5 / 5.0
    assert all(line.startswith(f"[shopsimrl] {label}: ") and line.endswith(" elapsed") for line in lines[1:])
    assert not any("…" in line or "━" in line for line in lines)


def test_eval_in_a_pipe_prints_plain_progress_lines(prepared_dir, tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "shopsimrl.cli", "eval", "--data", str(prepared_dir), "--split", "test",
                           "--policy", "heuristic", "--repeats", "3", "--out", str(tmp_path / "run"), "--no-report"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "episodes" in line]
    assert lines and lines[-1].startswith("[shopsimrl] heuristic · test: 6/6 episodes, success ")
    assert "…" not in done.stderr and "━" not in done.stderr
