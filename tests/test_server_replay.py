"""UI assets and the read-only replay API over the fixture run (tests/data/runs), on a live server."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import httpx
import pytest

from live_server import serve
from shopsimrl.env.shop_env import ShopWorld
from shopsimrl.server import ReplayError, RunsStore, create_app

RUNS = Path(__file__).parent / "data" / "runs"
RUN = "fixture-run"


@pytest.fixture(scope="module")
def base(prepared_dir):
    with serve(create_app(ShopWorld.from_data_dir(prepared_dir), slots=2, runs_dir=RUNS)) as url:
        yield url


@pytest.fixture
def http(base):
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client


def test_fixture_run_follows_runtime_spec():
    """The committed fixture is shaped as runtime_spec §5 says (so the replay UI is tested on the real format)."""
    run = RUNS / RUN
    manifest = json.loads((run / "manifest.json").read_text("utf-8"))
    assert manifest["schema_version"] == "shopsimrl-run-manifest-v1" and len(manifest["plan"]["jobs"]) == 4
    assert json.loads((run / "summary.json").read_text("utf-8"))["schema_version"] == "shopsimrl-eval-summary-v2"
    lines = (run / "traces.jsonl").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines[:-1]]
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[-1])  # a truncated tail line, as after a crash
    for record in records:
        assert record["schema_version"] == "shopsimrl-episode-v4"
        job = record["job"]
        assert record["episode_id"] == f"task-{job['task_id']:06d}__sample-{job['sample_id']:03d}"
        assert not {"env_idx", "lease_id", "private_task_instruction", "goal_options"} & set(record["reset"])
        for index, step in enumerate(record["steps"], start=1):
            assert step["step_index"] == index and {"observation", "tools", "model", "action", "environment"} <= set(step)


def test_ui_pages_and_assets_are_served_uncached(http):
    agent = http.get("/debug-ui")
    assert agent.status_code == 200 and agent.headers["content-type"].startswith("text/html")
    assert "ShopSimulator · Agent View" in agent.text and "Experiment Replay" in agent.text
    assert agent.headers["cache-control"].startswith("no-store")
    assert http.get("/debug-ui/").text == agent.text
    script = http.get("/debug-ui/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    for needle in ("/api/shop_agent", "action_feedback", "result.observation", "task_instruction", "sendBeacon",
                   "keepalive", "release_one"):
        assert needle in script.text, needle
    assert "result.instruction" not in script.text
    for sheet in ("styles.css", "replay.css"):
        assert http.get(f"/debug-ui/{sheet}").headers["content-type"].startswith("text/css")
    replay = http.get("/replay-ui")
    assert "ShopSimRL · Experiment Replay" in replay.text and "任务轨迹" in replay.text
    assert 'id="outcomeComparison"' in replay.text and "/debug-ui/replay.js" in replay.text
    replay_js = http.get("/debug-ui/replay.js").text
    assert "目标商品 vs 实际购买" in http.get("/replay-ui").text and "Gold truth option" in replay_js
    for name in ("nothing.js", "..%2Fapp.py", "app.py", "__init__.py"):
        assert http.get(f"/debug-ui/{name}").status_code == 404


def test_health_advertises_the_uis(http):
    health = http.get("/healthz").json()
    assert health["debug_ui"] == "/debug-ui" and health["replay_ui"] == "/replay-ui"


def test_list_runs_and_run_summary(http):
    runs = http.get("/api/runs").json()
    assert [run["name"] for run in runs["runs"]] == [RUN]
    assert runs["runs"][0]["artifacts"] == {"manifest.json": True, "summary.json": True, "traces.jsonl": True}
    run = http.get(f"/api/runs/{RUN}").json()
    assert run["trace_index"] == {"records": 4, "unique_episodes": 3, "duplicate_records": 1, "invalid_lines": 1}
    counts = run["computed_summary"]["counts"]
    assert counts == {"requested": 4, "recorded": 3, "pending": 1, "completed": 3, "failed": 0, "scored": 3}
    assert run["computed_summary"]["primary"]["reward_mean"] == pytest.approx(1 / 3)
    assert run["computed_summary"]["behavior"]["invalid_actions"] == 1
    assert run["computed_summary"]["behavior"]["protocol_errors"] == 1
    assert [e["episode_id"] for e in run["episodes"]] == [
        "task-000000__sample-000", "task-000003__sample-000", "task-000009__sample-000"]
    retried = run["episodes"][1]
    assert retried["status"] == "completed" and retried["termination_reason"] == "action_limit"  # the last line won
    assert run["artifact_summary"]["primary"]["reward_mean"] == pytest.approx(1 / 3)


def test_episode_and_outcome_comparison(http):
    data = http.get(f"/api/runs/{RUN}/episodes/task-000009__sample-000").json()
    assert data["summary"]["invalid_actions"] == 1 and data["summary"]["protocol_errors"] == 1
    assert data["episode"]["steps"][0]["model"]["reasoning"]
    outcome = data["outcome_comparison"]
    assert outcome["target"]["asin"] == "611000000001" and outcome["purchase"]["asin"] == "611000000002"
    assert outcome["asin_match"] is False
    assert outcome["attributes"] == {"matched": ["卷翘"], "missing": ["防水"], "extra": ["纤长"]}
    assert outcome["options"]["missing"] == ["棕色"] and outcome["options"]["purchased"] == {"颜色分类": "黑色"}
    good = http.get(f"/api/runs/{RUN}/episodes/task-000000__sample-000").json()["outcome_comparison"]
    assert good["asin_match"] is True and good["options"]["missing"] == [] and good["reward_detail"]["r_strict"] == 1.0


@pytest.mark.parametrize(("path", "statuses"), [
    ("/api/runs/..", {400}),
    ("/api/runs/.", {400}),
    ("/api/runs/%2E%2E", {400}),
    ("/api/runs/..%2F..%2Fetc", {400, 404}),
    ("/api/runs/%2Fetc%2Fpasswd", {400, 404}),
    ("/api/runs/fixture-run%2F..%2F..", {400, 404}),
    ("/api/runs/..%5C..", {400}),
    ("/api/runs/no-such-run", {404}),
    (f"/api/runs/{RUN}/episodes/..%2Fmanifest.json", {404}),
    (f"/api/runs/{RUN}/episodes/task-999999__sample-000", {404}),
    ("/api/runs/..%2F..%2Fpyproject.toml/episodes/x", {400, 404}),
])
def test_replay_rejects_traversal_and_unknown_names(base, path, statuses):
    status, body = _raw_get(base, path)
    assert status in statuses, (path, status, body)
    assert "error" in json.loads(body)
    assert "[project]" not in body and "root:" not in body


def _raw_get(base: str, path: str) -> tuple[int, str]:
    """GET with the path sent byte for byte (HTTP clients would remove the dot segments first)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode("utf-8")


def test_store_refuses_a_symlink_out_of_the_root(tmp_path):
    root, outside = tmp_path / "runs", tmp_path / "secret"
    root.mkdir()
    outside.mkdir()
    (outside / "summary.json").write_text("{}", "utf-8")
    os.symlink(outside, root / "escape")
    store = RunsStore(root)
    assert store.list_runs()["runs"] == []
    with pytest.raises(ReplayError) as info:
        store.run("escape")
    assert info.value.status == 400


def test_store_counts_broken_lines_and_keeps_the_last_record(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    rows = [{"episode_id": "e1", "status": "failed"}, [1, 2], {"no_id": 1}, {"episode_id": "e1", "status": "completed",
            "final": {"done": True, "reward": 0.5}, "schema_version": "shopsimrl-episode-v4"}]
    (run / "traces.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n\xff{bad\n", "utf-8")
    data = RunsStore(tmp_path / "runs").run("r1")
    assert data["trace_index"] == {"records": 2, "unique_episodes": 1, "duplicate_records": 1, "invalid_lines": 3}
    assert data["episodes"][0]["status"] == "completed" and data["computed_summary"]["primary"]["reward_mean"] == 0.5
    assert data["manifest"] is None and data["artifacts"]["manifest.json"] == {"present": False}
