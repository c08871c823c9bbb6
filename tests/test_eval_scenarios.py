"""``eval --scenarios``: ShopSimulator's four scenarios over the same tasks, one run directory each, one table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.cli import main
from shopsimrl.errors import ConfigError
from shopsimrl.eval.scenarios import (
    SCENARIOS,
    parse_scenarios,
    scenario_settings,
    scenarios_markdown,
)
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
GOLDEN = Path(__file__).parent / "golden" / "scenarios.md"


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scenarios") / "data"
    build_default_catalog(out, seed=7, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    return out


def test_parse_scenarios_keeps_shopsimulators_order():
    assert parse_scenarios("all") == list(SCENARIOS)
    assert [s.name for s in parse_scenarios("multi-persona,single-standard")] == ["single-standard", "multi-persona"]
    for bad in ("", "single", "all,multi-persona", "single-standard,nope"):
        with raises_kind(ConfigError, "scenario"):
            parse_scenarios(bad)


def test_four_scenarios_in_one_command(small_data, tmp_path, capsys):
    out = tmp_path / "sc"
    assert main(["eval", "--data", str(small_data), "--policy", "heuristic", "--scenarios", "all", "--limit", "8",
                 "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "four scenarios" in printed and "single-turn standard" in printed and "multi-turn persona" in printed
    plans = {s.name: json.loads((out / s.name / "manifest.json").read_text())["plan"] for s in SCENARIOS}
    jobs = {name: plan["jobs"] for name, plan in plans.items()}
    assert len({json.dumps(j) for j in jobs.values()}) == 1 and len(jobs["single-standard"]) == 8  # same tasks, seeds
    for s in SCENARIOS:
        plan = plans[s.name]
        assert plan["task_split"]["persona"] is s.persona
        assert plan["runtime"]["max_steps"] == (40 if s.multi_turn else 30)
        assert plan["environment"].get("shopper") == ("rule" if s.multi_turn else None)
        assert plan["model"]["policy"] == ("dialogue-heuristic" if s.multi_turn else "heuristic")
        assert (out / s.name / "report.html").is_file()
    table = json.loads((out / "scenarios.json").read_text())
    assert [row["scenario"] for row in table["rows"]] == [s.name for s in SCENARIOS]
    for row in table["rows"]:
        summary = json.loads((out / row["scenario"] / "summary.json").read_text())
        assert row["strict_score"]["mean"] == pytest.approx(100 * summary["primary"]["reward_mean"])
        assert row["success_rate"]["mean"] == pytest.approx(100 * summary["primary"]["success_rate"])
        low, high = row["success_rate"]["ci_low"], row["success_rate"]["ci_high"]
        assert low is None or low <= row["success_rate"]["mean"] <= high
    md = (out / "scenarios.md").read_text()
    assert md == scenarios_markdown(table)
    assert "| strict score (95% CI) |" in md and "<table>" in (out / "scenarios.html").read_text()
    # a second invocation resumes every scenario: nothing runs again, the table is the same
    assert main(["eval", "--data", str(small_data), "--policy", "heuristic", "--scenarios", "all", "--limit", "8",
                 "--out", str(out), "--no-progress", "--no-report"]) == 0
    assert json.loads((out / "scenarios.json").read_text()) == table


def test_scenarios_refuse_a_mode_or_turn_limit_of_their_own(small_data, tmp_path, capsys):
    for extra in (["--persona"], ["--max-steps", "10"]):
        assert main(["eval", "--data", str(small_data), "--policy", "heuristic", "--scenarios", "all",
                     "--out", str(tmp_path / "x"), *extra]) == 2
        assert "--scenarios sets the mode" in capsys.readouterr().err


def test_persona_scenarios_on_standard_tasks_are_refused_before_anything_runs(small_data, tmp_path, capsys):
    assert main(["eval", "--data", str(small_data), "--policy", "heuristic", "--scenarios", "all", "--split",
                 "standard", "--out", str(tmp_path / "s")]) == 2
    assert "no persona" in capsys.readouterr().err and not (tmp_path / "s").exists()


def test_standard_mode_on_a_persona_split_but_not_persona_on_standard_tasks(small_data, tmp_path, capsys):
    assert main(["eval", "--data", str(small_data), "--policy", "heuristic", "--split", "test", "--no-persona",
                 "--limit", "2", "--out", str(tmp_path / "std"), "--no-progress", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["eval", "--data", str(small_data), "--policy", "heuristic", "--split", "standard", "--persona",
                 "--limit", "2", "--out", str(tmp_path / "p"), "--no-progress", "--no-report"]) == 2
    assert "no persona" in capsys.readouterr().err


def _row(name: str, title: str, policy: str, steps: int, repeats: dict | None) -> dict:
    return {"scenario": name, "title": title, "run": f"runs/x/{name}", "policy": policy, "tasks": 400,
            "episodes": 400 * (repeats["repeats"] if repeats else 1), "requested": 400 * (repeats["repeats"] if repeats
                                                                                          else 1),
            "max_steps": steps, "strict_score": {"mean": 43.01, "ci_low": 38.2, "ci_high": 47.8},
            "success_rate": {"mean": 31.75, "ci_low": 27.2, "ci_high": 36.3}, "steps_mean": 4.37,
            "repeats": repeats}


def test_the_markdown_table_matches_its_golden_file():
    repeats = {"repeats": 3, "tasks": 400, "tasks_left_out": 0, "success_rate_mean": 0.3175, "success_rate_std": 0.0,
               "reward_mean_mean": 0.4301, "reward_mean_std": 0.0, "pass_hat_k": {"3": 0.3175},
               "pass_at_k": {"3": 0.3175}, "flip_rate": 0.0, "identical": True}
    table = {"schema_version": "shopsimrl-scenarios-v1", "label": "heuristic on test", "rows": [
        _row("single-standard", "single-turn standard", "heuristic", 30, repeats),
        _row("single-persona", "single-turn persona", "heuristic", 30, repeats),
        _row("multi-standard", "multi-turn standard", "dialogue-heuristic", 40, None),
        _row("multi-persona", "multi-turn persona", "dialogue-heuristic", 40, repeats),
    ]}
    assert scenarios_markdown(table) == GOLDEN.read_text("utf-8")


@pytest.mark.parametrize("cap", [None, 1, 10, 29, 30, 31, 39, 40, 41, 100])
def test_a_scenario_turn_cap_only_lowers_the_environments_limit(cap):
    from shopsimrl.eval.runner import EvalSettings

    base = EvalSettings(data="unused", out="runs/x", policy="heuristic")
    for scenario in SCENARIOS:
        own = 40 if scenario.multi_turn else 30
        limit = scenario_settings(base, scenario, max_steps=cap).max_steps
        assert limit == (own if cap is None else min(own, cap))
