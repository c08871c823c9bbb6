"""Difficulty tiers: computed once per catalog, deterministic, and honoured by eval and every task source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl.agent.difficulty import measure_policy
from shopsimrl.agent.tier_cascade import compute_tiers
from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.catalog.store import Catalog
from shopsimrl.catalog.tiers import (
    TIER_POLICIES,
    TIERS,
    TIERS_FILE,
    parse_difficulty,
    read_tiers,
    split_task_ids,
)
from shopsimrl.cli import main
from shopsimrl.errors import DataError
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog
from shopsimrl.train.slime import task_lines
from shopsimrl.train.trl import task_prompts

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiers") / "data"
    build_default_catalog(out, seed=7, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    compute_tiers(out, workers=1)
    return out


def test_parse_difficulty():
    assert parse_difficulty(None) is None
    assert parse_difficulty("none, first") == ("first", "none")
    for bad in ("", "easy", "first,hard"):
        with raises_kind(DataError, "difficulty"):
            parse_difficulty(bad)


def test_every_task_gets_the_first_policy_that_solves_it(tiered):
    tiers = read_tiers(tiered)
    catalog = Catalog.from_data_dir(tiered)
    ids = sorted(catalog.goals)
    catalog.close()
    assert sorted(tiers) == ids and set(tiers.values()) <= set(TIERS)
    solved = {p: set(ids) - set(measure_policy(tiered, p, ids, workers=1).failed_task_ids) for p in TIER_POLICIES}
    for task, tier in tiers.items():  # the whole population, against each policy played on every task
        expected = next((p for p in TIER_POLICIES if task in solved[p]), "none")
        assert tier == expected, task
    assert len(set(tiers.values())) >= 3  # the small catalog has a spread of difficulty


def test_tiers_are_deterministic_and_keyed_by_the_catalog(tiered, tmp_path, capsys):
    stored = (tiered / TIERS_FILE).read_bytes()
    assert main(["data", "tiers", str(tiered), "--no-cache", "--workers", "2", "--json"]) == 0
    assert (tiered / TIERS_FILE).read_bytes() == stored  # another worker count, the same bytes
    counts = json.loads(capsys.readouterr().out)
    assert list(counts) == sorted(TIERS) and sum(counts.values()) == len(read_tiers(tiered))
    stale = json.loads(stored)
    stale["key"]["data_sha256"] = "0" * 64  # labels of another catalog are never read
    (tmp_path / "copy").mkdir()
    for name in ("manifest.json",):
        (tmp_path / "copy" / name).write_bytes((tiered / name).read_bytes())
    (tmp_path / "copy" / TIERS_FILE).write_text(json.dumps(stale))
    with raises_kind(DataError, "difficulty", match="shopsimrl data tiers"):
        read_tiers(tmp_path / "copy")


def test_eval_difficulty_filters_the_plan_and_reports_success_per_tier(tiered, tmp_path, capsys):
    tiers = read_tiers(tiered)
    out = tmp_path / "first"
    assert main(["eval", "--data", str(tiered), "--split", "test", "--policy", "first", "--difficulty", "first",
                 "--out", str(out), "--no-progress"]) == 0
    plan = json.loads((out / "manifest.json").read_text())["plan"]
    assert plan["task_split"]["difficulty"] == ["first"]
    ran = [job["task_id"] for job in plan["jobs"]]
    test_ids = split_task_ids(tiered, "test")
    assert ran == [t for t in test_ids if tiers[t] == "first"] and ran
    summary = json.loads((out / "summary.json").read_text())
    assert summary["by_difficulty"] == {"first": {"episodes": len(ran), "success_rate": 1.0,
                                                  "reward_mean": 1.0}}  # `first` solves its own tier
    assert "Success by difficulty tier" in (out / "report.md").read_text()
    everything = tmp_path / "all"
    assert main(["eval", "--data", str(tiered), "--split", "test", "--policy", "heuristic", "--out",
                 str(everything), "--no-progress", "--no-report"]) in (0, 1)
    by = json.loads((everything / "summary.json").read_text())["by_difficulty"]
    assert sum(v["episodes"] for v in by.values()) == len(test_ids)
    assert by.get("none", {"success_rate": 0.0})["success_rate"] == 0.0  # nothing public solves `none`
    assert by.get("heuristic", {"success_rate": 1.0})["success_rate"] == 1.0


def test_every_adapter_task_source_filters_by_tier(tiered, tmp_path):
    tiers = read_tiers(tiered)
    hard = split_task_ids(tiered, "train", difficulty="strong,none")
    assert hard == [t for t in split_task_ids(tiered, "train") if tiers[t] in ("strong", "none")] and hard
    assert split_task_ids(tiered, "train", difficulty="strong,none", limit=3) == hard[:3]
    columns = task_prompts(hard, tiers=tiers)  # TRL dataset
    assert set(columns["difficulty"]) <= {"strong", "none"} and columns["task_id"] == hard
    lines = task_lines(hard, "train", tiers=tiers)  # slime metadata
    assert {line["metadata"]["difficulty"] for line in lines} <= {"strong", "none"}
    done = subprocess.run([sys.executable, str(ROOT / "examples/slime/build_tasks.py"), "--data", str(tiered),
                           "--out", str(tmp_path / "slime"), "--difficulty", "first"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for line in (tmp_path / "slime" / "train.jsonl").read_text().splitlines()]
    assert written and {line["metadata"]["difficulty"] for line in written} == {"first"}


def test_verl_rows_filter_by_tier(tiered):
    pytest.importorskip("pandas")
    from shopsimrl.train.verl import task_rows

    rows = task_rows(tiered, "train", difficulty="first")
    tiers = read_tiers(tiered)
    assert [r["extra_info"]["task_id"] for r in rows] == [t for t in split_task_ids(tiered, "train")
                                                          if tiers[t] == "first"]
    assert {r["extra_info"]["difficulty"] for r in rows} == {"first"}
