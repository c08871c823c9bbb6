"""Evaluation pipeline: summary and bootstrap arithmetic on hand-built traces, run directories, resume after a
SIGKILL, retry waves, determinism, and identical traces in-process and through the HTTP service."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from error_kinds import raises_kind
from live_server import serve, unavailable_service
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.env import ShopWorld
from shopsimrl.errors import ConfigError, ServiceError
from shopsimrl.eval import EvalSettings, evaluate
from shopsimrl.eval.compare import compare_runs, metric_seed, paired_bootstrap
from shopsimrl.eval.plan import build_jobs, episode_seed
from shopsimrl.eval.rundir import latest_records
from shopsimrl.eval.summary import summarize
from shopsimrl.server import create_app

VOLATILE = ("started_at", "ended_at", "duration_ms", "latency_ms")


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


# ---------------------------------------------------------------- hand-built traces
def trace(task_id, *, reward=1.0, success=1, steps=(), status="completed", reason="purchase", error=None,
          sample_id=0, usage=None, extra_detail=None):
    detail = {"r_strict": reward, "r_success": success, "r_loose": reward, "r_type": 1.0, "target_asin_match": True,
              **(extra_detail or {})}
    records = []
    for kind in steps:
        step = {"step_index": len(records) + 1, "model": {"usage": usage or {}}, "action": None, "environment": None}
        if kind == "protocol":
            step["protocol_error"] = {"code": "tool_call_count", "message": ""}
        elif kind == "policy":
            step["policy_failure"] = {"code": "generation_length", "message": ""}
        else:
            step["action"] = "click[x]"
            step["environment"] = {"done": False, "action_feedback": {"valid": kind == "valid"}}
        records.append(step)
    return {
        "schema_version": "shopsimrl-episode-v4", "episode_id": f"task-{task_id:06d}__sample-{sample_id:03d}",
        "status": status, "job": {"task_id": task_id, "sample_id": sample_id, "seed": 1, "split": "test"},
        "steps": records, "duration_ms": 10.0 * (task_id + 1),
        "final": None if status == "failed" else {"done": True, "reward": reward, "reward_detail": detail,
                                                  "termination_reason": reason},
        "error": error,
    }


def test_summary_reports_coverage_behaviour_and_reward():
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
             "completion_tokens_details": {"reasoning_tokens": 3}}
    records = [trace(1, reward=1.0, success=1, steps=["valid"], usage=usage),
               trace(2, reward=0.0, success=0, steps=["invalid"], usage=usage)]
    s = summarize(records)
    assert s["schema_version"] == "shopsimrl-eval-summary-v2"
    assert s["counts"] == {"requested": 2, "trace_files": 2, "completed": 2, "failed": 0, "scored": 2, "coverage": 1.0}
    assert s["primary"]["reward_mean"] == 0.5 and s["primary"]["success_rate"] == 0.5
    assert s["primary"]["reward_sem"] == pytest.approx(np.std([1.0, 0.0], ddof=1) / np.sqrt(2))
    b = s["behavior"]
    assert (b["model_steps"], b["protocol_errors"], b["policy_failures"]) == (2, 0, 0)
    assert b["invalid_actions"] == 1 and b["total_actions"] == 2 and b["invalid_action_rate"] == 0.5
    assert s["cost"]["tokens"] == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
                                   "reasoning_tokens": 6}
    assert s["cost"]["duration_ms_mean"] == 25.0
    assert s["reward_components"] == {"r_loose": 0.5, "r_strict": 0.5, "r_success": 0.5, "r_type": 1.0}


def test_summary_separates_protocol_steps_from_environment_actions():
    s = summarize([trace(1, steps=["protocol", "valid"])])
    b = s["behavior"]
    assert (b["model_steps"], b["protocol_errors"], b["protocol_error_rate"], b["total_actions"]) == (2, 1, 0.5, 1)
    assert b["steps_mean"] == 2.0


def test_summary_counts_generation_length_as_a_scored_policy_failure():
    s = summarize([trace(1, reward=0.0, success=0, steps=["policy"], reason="generation_length")])
    assert s["counts"]["completed"] == 1 and s["counts"]["scored"] == 1 and s["primary"]["reward_mean"] == 0.0
    assert s["behavior"]["policy_failures"] == 1 and s["behavior"]["policy_failure_rate"] == 1.0
    assert s["behavior"]["total_actions"] == 0 and s["behavior"]["invalid_action_rate"] is None
    assert s["behavior"]["termination_reasons"] == {"generation_length": 1}


def test_summary_of_failures_and_missing_episodes():
    failed = trace(2, status="failed", error={"type": "ModelCallError", "code": "model_request", "stage": "model_step_1"})
    s = summarize({r["episode_id"]: r for r in [trace(1, reward=0.25), failed]}, requested=4)
    assert s["counts"] == {"requested": 4, "trace_files": 2, "completed": 1, "failed": 1, "scored": 1, "coverage": 0.25}
    assert s["primary"]["reward_mean"] == 0.25 and s["primary"]["reward_sem"] is None
    assert s["errors"] == {"ModelCallError(model_request)": 1}
    empty = summarize([], requested=3)
    assert empty["primary"]["reward_mean"] is None and empty["counts"]["coverage"] == 0.0


def test_trace_file_last_line_wins_and_broken_lines_are_skipped(tmp_path):
    path = tmp_path / "traces.jsonl"
    first = trace(1, status="failed", error={"type": "X"})
    second = trace(1, reward=0.5)
    path.write_text(json.dumps(first) + "\n\n" + json.dumps(second) + "\n" + '{"episode_id": "task-0000', "utf-8")
    latest = latest_records(path)
    assert list(latest) == ["task-000001__sample-000"] and latest["task-000001__sample-000"]["final"]["reward"] == 0.5


# ---------------------------------------------------------------- jobs and bootstrap arithmetic
def test_jobs_are_deterministic_and_support_repeats_and_samples():
    jobs = build_jobs([4, 8, 15, 16], split="val", seed=42, repeats=3, sample_size=2)
    assert jobs == build_jobs([4, 8, 15, 16], split="val", seed=42, repeats=3, sample_size=2)
    assert len(jobs) == 6 and {j.sample_id for j in jobs} == {0, 1, 2} and len({j.seed for j in jobs}) == 6
    import hashlib

    assert jobs[0].seed == int.from_bytes(hashlib.sha256(f"42:{jobs[0].task_id}:0".encode()).digest()[:4], "big")
    assert episode_seed(42, 4, 0) == int.from_bytes(hashlib.sha256(b"42:4:0").digest()[:4], "big")
    assert [j.task_id for j in build_jobs([4, 8, 15], split="test", limit=2)] == [4, 8]


def test_paired_bootstrap_arithmetic():
    a, b = [0.0, 1.0, 0.0, 1.0, 0.5], [1.0, 1.0, 0.0, 1.0, 1.0]
    out = paired_bootstrap(a, b, metric="r_strict", resamples=2000)
    diff = np.array(b) - np.array(a)
    rng = np.random.default_rng(int.from_bytes(__import__("hashlib").sha256(b"20260901:r_strict").digest()[:8], "big"))
    means = diff[rng.integers(0, 5, size=(2000, 5))].mean(axis=1)
    assert out["diff"] == pytest.approx(0.3)
    assert (out["ci_low"], out["ci_high"]) == tuple(np.percentile(means, [2.5, 97.5], method="linear"))
    assert out["seed"] == metric_seed("r_strict") and out["mean_a"] == 0.5 and out["mean_b"] == 0.8
    constant = paired_bootstrap([0, 0, 0], [1, 1, 1], metric="x")
    assert (constant["ci_low"], constant["diff"], constant["ci_high"]) == (1.0, 1.0, 1.0)
    assert paired_bootstrap(a, b, metric="r_strict", resamples=2000) == out  # seeded: reproducible
    with raises_kind(ConfigError, "comparison"):
        paired_bootstrap([1.0], [], metric="x")


def _write_run(root: Path, records, *, model="m", jobs=None):
    jobs = jobs or [r["job"] for r in records]
    plan = {"pipeline_version": "shopsimrl-v0.4", "experiment": root.name, "model_id": model, "model": {"model": model},
            "task_split": {"name": "test", "task_ids_sha256": "x", "persona": True}, "jobs": jobs,
            "environment": {"adapter": "in-process", "catalog": {"data_sha256": "c"}},
            "runtime": {"max_steps": 30, "action_protocol": "openai-function-tools-repair-v3"},
            "prompt": {}, "skills": {}}
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"schema_version": "shopsimrl-run-manifest-v1",
                                                   "plan_fingerprint": model, "plan": plan}))
    (root / "traces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_compare_transitions_and_alignment(tmp_path):
    a = [trace(1, success=0, reward=0.0), trace(2, success=1), trace(3, success=1), trace(4, success=0, reward=0.2)]
    b = [trace(1, success=1), trace(2, success=0, reward=0.5), trace(3, success=1), trace(4, success=0, reward=0.2)]
    _write_run(tmp_path / "a", a, model="a")
    _write_run(tmp_path / "b", b, model="b")
    result = compare_runs(str(tmp_path / "a"), str(tmp_path / "b"), resamples=500)
    assert result["transitions"] == {"fail_to_success": 1, "success_to_fail": 1, "both_success": 1, "neither": 1}
    assert result["metrics"]["r_strict"]["diff"] == pytest.approx((1.0 - 0.0 + 0.5 - 1.0) / 4)
    assert result["paired_episodes"] == 4 and result["alignment"]["differs_in"] == ["model"]
    _write_run(tmp_path / "short", b[:3], model="c", jobs=[r["job"] for r in b])
    with raises_kind(ConfigError, "comparison", match="not completed in both"):
        compare_runs(str(tmp_path / "a"), str(tmp_path / "short"))
    assert compare_runs(str(tmp_path / "a"), str(tmp_path / "short"), allow_partial=True)["paired_episodes"] == 3
    _write_run(tmp_path / "other", b[:2], model="d")
    with raises_kind(ConfigError, "comparison", match="job lists differ"):
        compare_runs(str(tmp_path / "a"), str(tmp_path / "other"))


# ---------------------------------------------------------------- real runs
def _volatile_free(value):
    if isinstance(value, dict):
        return {k: _volatile_free(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_volatile_free(v) for v in value]
    return value


def _traces(run: Path) -> dict[str, dict]:
    return {eid: _volatile_free(r) for eid, r in latest_records(run / "traces.jsonl").items()}


def test_two_heuristic_runs_are_identical(world, prepared_dir, tmp_path):
    runs = []
    for name in ("one", "two"):
        out = tmp_path / name
        result = evaluate(EvalSettings(data=str(prepared_dir), out=str(out), split="all", policy="heuristic",
                                       concurrency=4, experiment="same"), world=world)
        assert result.summary["counts"]["completed"] == len(world.catalog.split("all"))
        runs.append(out)
    one, two = _traces(runs[0]), _traces(runs[1])
    assert one == two and len(one) == len(world.catalog.split("all"))
    assert json.loads((runs[0] / "manifest.json").read_text())["plan_fingerprint"] == json.loads(
        (runs[1] / "manifest.json").read_text())["plan_fingerprint"]
    s1, s2 = (json.loads((r / "summary.json").read_text()) for r in runs)
    s1["cost"].pop("duration_ms_mean"), s2["cost"].pop("duration_ms_mean")
    assert s1 == s2


def test_a_directory_refuses_another_plan_and_skips_completed(world, prepared_dir, tmp_path):
    out = tmp_path / "run"
    settings = dict(data=str(prepared_dir), out=str(out), split="test", concurrency=2)
    first = evaluate(EvalSettings(policy="heuristic", **settings), world=world)
    again = evaluate(EvalSettings(policy="heuristic", **settings), world=world)
    assert first.ran == 2 and again.ran == 0 and again.skipped == 2 and again.resumed
    assert len((out / "traces.jsonl").read_text().splitlines()) == 2
    with raises_kind(ConfigError, "run_dir", match="another plan"):
        evaluate(EvalSettings(policy="random", **settings), world=world)


def test_in_process_and_service_give_identical_traces(world, prepared_dir, tmp_path):
    local = tmp_path / "local"
    evaluate(EvalSettings(data=str(prepared_dir), out=str(local), split="all", policy="heuristic", concurrency=3),
             world=world)
    with serve(create_app(world, slots=4)) as url:
        remote = tmp_path / "remote"
        result = evaluate(EvalSettings(data=str(prepared_dir), out=str(remote), split="all", policy="heuristic",
                                       env_url=url, concurrency=3), world=world)
    assert result.summary["counts"]["completed"] == len(world.catalog.split("all"))
    a, b = _traces(local), _traces(remote)
    assert set(a) == set(b)
    for eid in a:
        env_a, env_b = a[eid]["provenance"].pop("environment"), b[eid]["provenance"].pop("environment")
        assert (env_a["adapter"], env_b["adapter"]) == ("in-process", "http")
        assert {k: v for k, v in env_a.items() if k not in ("adapter", "base_url")} == {
            k: v for k, v in env_b.items() if k not in ("adapter", "base_url")}
        # step responses name the session that served them (in-process "session-0", a service slot id)
        for record in (a[eid], b[eid]):
            assert record["final"].pop("idx") and all(s["environment"].pop("idx") for s in record["steps"])
        assert a[eid] == b[eid], eid
    comparison = compare_runs(str(local), str(remote), resamples=200)
    assert comparison["metrics"]["r_strict"]["diff"] == 0.0
    assert any("HTTP service" in w for w in comparison["alignment"]["warnings"])


def test_a_dead_env_url_fails_once_before_any_episode(world, prepared_dir, tmp_path):
    """Issue 45 item 7: no connection at all is one ServiceError up front, not three failed attempts per task."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    dead = tmp_path / "dead"
    with pytest.raises(ServiceError, match=f"--env-url {re.escape(url)} cannot be reached"):
        evaluate(EvalSettings(data=str(prepared_dir), out=str(dead), split="test", policy="heuristic",
                              env_url=url, env_timeout=2.0), world=world)
    assert not (dead / "traces.jsonl").exists()


def test_technical_failures_are_retried_in_waves(world, prepared_dir, tmp_path):
    # the service answers but every reset fails: three attempts per episode
    dead = tmp_path / "dead"
    with serve(unavailable_service) as url:
        result = evaluate(EvalSettings(data=str(prepared_dir), out=str(dead), split="test", policy="heuristic",
                                       env_url=url, env_timeout=2.0), world=world)
    lines = [json.loads(line) for line in (dead / "traces.jsonl").read_text().splitlines()]
    assert len(lines) == 3 * 2 and all(r["status"] == "failed" and r["error"]["stage"] == "reset" for r in lines)
    assert result.summary["counts"]["failed"] == 2 and result.summary["primary"]["reward_mean"] is None
    # a transient model failure (HTTP 500 on the first try, no client retries): the second attempt succeeds
    with serve(create_policy_app(world, policy="heuristic")) as url:
        from shopsimrl.agent.model_client import ModelSettings

        flaky = tmp_path / "flaky"
        model = ModelSettings(base_url=f"{url}/v1", model="shopsim-heuristic", max_retries=0,
                              extra_body={"shopsim_fault_script": {"1": "http_500_once"}})
        result = evaluate(EvalSettings(data=str(prepared_dir), out=str(flaky), split="test", model=model), world=world)
    lines = [json.loads(line) for line in (flaky / "traces.jsonl").read_text().splitlines()]
    assert [r["status"] for r in lines] == ["failed", "failed", "completed", "completed"]
    assert result.summary["counts"]["completed"] == 2 and result.summary["counts"]["failed"] == 0


def test_resume_after_sigkill_loses_and_duplicates_nothing(prepared_dir, tmp_path):
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "shopsimrl.cli", "eval", "--data", str(prepared_dir), "--split", "all",
               "--policy", "random", "--repeats", "40", "--concurrency", "4", "--out", str(out),
               "--no-progress", "--no-report"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    traces = out / "traces.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if traces.exists() and traces.stat().st_size and len(traces.read_bytes().splitlines()) >= 25:
            break
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    total = 40 * 15
    before = [line for line in traces.read_bytes().splitlines() if line.strip()]
    assert 25 <= len(before) < total, "the evaluator finished before it could be killed"
    done_before = {json.loads(line)["episode_id"] for line in before if line.endswith(b"}")}
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "already completed" in resumed.stderr
    records = [json.loads(line) for line in traces.read_bytes().splitlines() if line.strip()]
    completed = [r["episode_id"] for r in records if r["status"] == "completed"]
    assert len(completed) == len(set(completed)) == total  # nothing lost, nothing run twice
    assert done_before <= set(completed)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["completed"] == total and summary["counts"]["coverage"] == 1.0


def test_trace_line_is_compact_json_and_falls_back_for_what_orjson_refuses() -> None:
    import json as _json

    from shopsimrl.eval.rundir import trace_line

    record = {"b": 1, "a": [1.5, None, "中文"], "nested": {"x": (1, 2)}}
    line = trace_line(record)
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert line == _json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    big = {"n": 2**70}
    assert _json.loads(trace_line(big)) == big
    assert _json.loads(trace_line({"r": float("nan")})) == {"r": None}


# ---------------------------------------------------------------- issue 13 item 8: damaged run directories
def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.mark.parametrize("damage", ["no plan", "no jobs", "not an object"])
def test_a_damaged_manifest_is_refused_before_anything_is_touched(world, prepared_dir, tmp_path, damage):
    out = tmp_path / "run"
    settings = EvalSettings(data=str(prepared_dir), out=str(out), split="test", policy="heuristic", concurrency=2)
    evaluate(settings, world=world)
    manifest = json.loads((out / "manifest.json").read_text())
    if damage == "no plan":
        del manifest["plan"]
    elif damage == "no jobs":
        del manifest["plan"]["jobs"]
    else:
        manifest["plan"] = "x"
    (out / "manifest.json").write_text(json.dumps(manifest))
    before = _snapshot(out)
    with raises_kind(ConfigError, "run_dir", match="has no plan"):
        evaluate(settings, world=world)
    assert _snapshot(out) == before  # summary.json and traces.jsonl untouched


def test_a_manifest_that_is_a_directory_is_a_typed_error(world, prepared_dir, tmp_path):
    out = tmp_path / "run"
    (out / "manifest.json").mkdir(parents=True)
    settings = EvalSettings(data=str(prepared_dir), out=str(out), split="test", policy="heuristic")
    with raises_kind(ConfigError, "run_dir", match=r"manifest\.json is a directory"):
        evaluate(settings, world=world)


def test_resume_reports_unparseable_trace_lines(world, prepared_dir, tmp_path):
    out = tmp_path / "run"
    settings = EvalSettings(data=str(prepared_dir), out=str(out), split="all", policy="heuristic", concurrency=2)
    evaluate(settings, world=world)
    lines = (out / "traces.jsonl").read_text("utf-8").splitlines(keepends=True)
    lines[2] = '{"episode_id": "task-00\n'  # a line cut by a crash
    lines[5] = "not json at all\n"
    lines.insert(7, "\n")  # blank lines are not reported
    lines.insert(8, '{"no_episode": 1}\n')
    (out / "traces.jsonl").write_text("".join(lines), "utf-8")
    warnings: list[str] = []
    again = evaluate(settings, world=world, on_warning=warnings.append)
    assert again.extra["unparseable_trace_lines"] == [3, 6, 9]
    assert len(warnings) == 1 and "3 line(s) could not be parsed" in warnings[0] and "(line 3, 6, 9)" in warnings[0]
    assert again.ran == 2 and again.summary["counts"]["completed"] == len(world.catalog.split("all"))
    clean = evaluate(settings, world=world, on_warning=warnings.append)
    assert clean.ran == 0 and len(warnings) == 2  # the same broken lines are still there, and still reported


def test_trace_line_escapes_lone_surrogates() -> None:
    from shopsimrl.eval.rundir import trace_line

    record = {"episode_id": "e", "text": "bad \ud800 中文"}
    line = trace_line(record)
    line.encode("utf-8")  # writable as UTF-8
    assert json.loads(line) == record


def test_report_with_out_leaves_the_run_directory_untouched(tmp_path):
    """``report RUN --out DIR`` reads the run and writes summary, report and figures into DIR only."""
    from shopsimrl.eval.report import write_report

    run = Path(__file__).parent / "data" / "runs" / "fixture-run"
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    paths = write_report(str(run), out=str(tmp_path / "out"))
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert Path(paths["html"]).parent == tmp_path / "out"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]
