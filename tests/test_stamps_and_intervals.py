"""Version stamps on every result and clustered bootstrap intervals (issue 44 items 4 and 5).

A real ``eval`` on a small generated catalog: its stamps (environment version, generator version, catalog hash,
task-set hash) are the catalog's and the plan's, the same in every trace, the summary and the report; ``compare``
refuses runs on different stamps unless told to warn. The clustered bootstrap is checked by its properties
(one cluster has no spread, duplicating episodes within their clusters changes nothing, perfectly correlated
clusters widen the interval) and against the summary and comparison it feeds.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.catalog.store import read_manifest
from shopsimrl.cli import main
from shopsimrl.errors import ConfigError
from shopsimrl.eval.clusters import cluster_bootstrap, plan_clusters
from shopsimrl.eval.compare import check_alignment, compare_runs
from shopsimrl.eval.rundir import RunDir, latest_records
from shopsimrl.generate import GENERATOR_VERSION, GeneratorConfig
from shopsimrl.generate.default import build_default_catalog
from shopsimrl.stamps import STAMP_KEYS, generator_version, plan_stamps, task_set_sha256
from shopsimrl.versions import ENVIRONMENT_VERSION

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stamps") / "data"
    build_default_catalog(out, seed=7, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    return out


@pytest.fixture(scope="module")
def runs(small_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stamp-runs")
    out = {}
    for policy in ("heuristic", "first"):
        out[policy] = root / policy
        assert main(["eval", "--data", str(small_data), "--split", "test", "--policy", policy,
                     "--out", str(out[policy])]) == 0
    return out


def test_every_trace_summary_and_report_carries_the_catalogs_stamps(small_data, runs):
    manifest = read_manifest(small_data)
    run = RunDir(str(runs["heuristic"]))
    plan = run.plan().plan
    expected = {"environment_version": ENVIRONMENT_VERSION, "generator_version": GENERATOR_VERSION,
                "catalog_sha256": manifest["output_data_sha256"],
                "task_set_sha256": task_set_sha256(("test", t) for t in json.loads(
                    (small_data / "task_splits.json").read_text())["splits"]["test"]["task_ids"])}
    assert plan_stamps(plan) == expected and tuple(expected) == STAMP_KEYS
    summary = json.loads((runs["heuristic"] / "summary.json").read_text())
    assert summary["stamps"] == expected
    traces = latest_records(runs["heuristic"] / "traces.jsonl")
    assert traces and all(r["provenance"]["stamps"] == expected for r in traces.values())
    report = (runs["heuristic"] / "report.md").read_text()
    assert all(f"{key} `{value}`" in report for key, value in expected.items())


def test_a_catalog_that_was_not_generated_has_no_generator_version(prepared_dir, small_data):
    assert generator_version(prepared_dir, read_manifest(prepared_dir)) is None
    assert generator_version(small_data, read_manifest(small_data)) == GENERATOR_VERSION
    tampered = dict(read_manifest(small_data), source_archive_sha256="0" * 64)  # not the archive beside it
    assert generator_version(small_data, tampered) is None


def test_task_set_hash_ignores_order_and_repeats_but_not_membership():
    assert task_set_sha256([("test", 2), ("test", 1), ("test", 2)]) == task_set_sha256([("test", 1), ("test", 2)])
    assert task_set_sha256([("test", 1)]) != task_set_sha256([("val", 1)]) != task_set_sha256([("val", 2)])


@pytest.mark.parametrize("key, path", [
    ("catalog_sha256", ("environment", "catalog", "data_sha256")),
    ("generator_version", ("environment", "catalog", "generator_version")),
    ("environment_version", ("environment", "environment_version")),
])
def test_compare_refuses_different_stamps_unless_told_to_warn(runs, key, path):
    plan_a = RunDir(str(runs["heuristic"])).plan().plan
    plan_b = copy.deepcopy(RunDir(str(runs["first"])).plan().plan)
    assert check_alignment(plan_a, plan_b)["problems"] == []
    node = plan_b
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = "something-else"
    refused = check_alignment(plan_a, plan_b)
    assert any(p.startswith("version stamps differ") and key in p for p in refused["problems"]), refused
    warned = check_alignment(plan_a, plan_b, allow_stamps=True)
    assert warned["problems"] == [] and any(key in w for w in warned["warnings"]), warned


def test_compare_command_refuses_a_run_on_another_catalog(runs, small_data, tmp_path, capsys):
    other = tmp_path / "other-data"
    build_default_catalog(other, seed=8, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    assert main(["eval", "--data", str(other), "--split", "test", "--policy", "first", "--out",
                 str(tmp_path / "run")]) == 0
    with raises_kind(ConfigError, "comparison", match=r"version stamps differ.*catalog_sha256"):
        compare_runs(str(runs["heuristic"]), str(tmp_path / "run"))
    assert main(["compare", str(runs["heuristic"]), str(tmp_path / "run")]) != 0
    assert "version stamps differ" in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.floats(0, 1)), min_size=1, max_size=30),
       st.integers(2, 4))
def test_duplicating_episodes_within_their_clusters_changes_nothing(rows, times):
    labels, values = [r[0] for r in rows], [r[1] for r in rows]
    once = cluster_bootstrap(values, labels, metric="m", clustering="c", resamples=300)
    many = cluster_bootstrap(values * times, labels * times, metric="m", clustering="c", resamples=300)
    for key in ("mean", "ci_low", "ci_high", "clusters"):
        assert many[key] == pytest.approx(once[key])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=20))
def test_one_cluster_has_no_spread(values):
    out = cluster_bootstrap(values, ["x"] * len(values), metric="m", clustering="c", resamples=200)
    assert out["ci_low"] == pytest.approx(out["mean"]) == pytest.approx(out["ci_high"])


def test_correlated_clusters_widen_the_interval():
    labels = [f"leaf{i // 10}" for i in range(100)]
    values = [float((i // 10) % 2) for i in range(100)]  # whole leaves succeed or fail together
    plain = cluster_bootstrap(values, [str(i) for i in range(100)], metric="m", clustering="episode")
    clustered = cluster_bootstrap(values, labels, metric="m", clustering="leaf_category")
    assert clustered["clusters"] == 10 and plain["clusters"] == 100
    assert clustered["ci_high"] - clustered["ci_low"] > 2 * (plain["ci_high"] - plain["ci_low"])
    with pytest.raises(ValueError):
        cluster_bootstrap([1.0], ["a", "b"], metric="m", clustering="c")


def test_summary_and_compare_carry_plain_and_clustered_intervals(runs, tmp_path):
    summary = json.loads((runs["heuristic"] / "summary.json").read_text())
    plan = RunDir(str(runs["heuristic"])).plan().plan
    clusters = plan_clusters(plan)
    tasks = [job["task_id"] for job in plan["jobs"]]
    leaves = {clusters["leaf_category"][t] for t in tasks}
    for metric in ("r_strict", "r_success"):
        rows = summary["intervals"][metric]
        assert rows["episode"]["clusters"] == len(tasks) and rows["leaf_category"]["clusters"] == len(leaves)
        assert rows["episode"]["mean"] == pytest.approx(rows["leaf_category"]["mean"])
    assert summary["intervals"]["r_strict"]["episode"]["mean"] == pytest.approx(summary["primary"]["reward_mean"])
    persona = [t for t in tasks if t in clusters["persona_group"]]
    assert ("persona_group" in summary["intervals"]["r_strict"]) == (len(persona) == len(tasks))
    result = compare_runs(str(runs["first"]), str(runs["heuristic"]), resamples=500)
    clustered = result["metrics"]["r_strict"]["clustered"]["leaf_category"]
    assert clustered["clusters"] == len(leaves) and clustered["ci_low"] <= clustered["ci_high"]
    report = (runs["heuristic"] / "report.md").read_text()
    assert "## Bootstrap intervals" in report and "| r_strict | leaf categories |" in report
    assert main(["report", str(runs["heuristic"]), "--vs", str(runs["first"]), "--out", str(tmp_path)]) == 0
    assert "95% CI, leaf clusters" in (tmp_path / "report.md").read_text()
