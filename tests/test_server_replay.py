"""UI assets and the read-only replay API over the fixture run (tests/data/runs), on a live server."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import httpx
import pytest

from error_kinds import raises_kind
from live_server import serve
from shopsimrl.env import ShopWorld
from shopsimrl.errors import RequestError
from shopsimrl.server import RunsStore, create_app
from shopsimrl.server.http_errors import status_of

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
    """The committed fixture is shaped as docs/contract.md#run-directories says (so the replay UI is tested on the real format)."""
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
    assert "ShopSimRL · Agent View" in agent.text and "Experiment Replay" in agent.text
    # one product name in every page title (issue 28 item 8)
    import re

    for page in (agent.text, http.get("/replay-ui").text):
        title = re.search(r"<title>(.*?)</title>", page).group(1)
        assert title.startswith("ShopSimRL · ") and "ShopSimulator" not in page
    assert agent.headers["cache-control"].startswith("no-store")
    assert http.get("/debug-ui/").text == agent.text
    script = http.get("/debug-ui/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    for needle in ("/api/shop_agent", "action_feedback", "result.observation", "task_instruction", "apiFetch",
                   "keepalive", "release_one"):
        assert needle in script.text, needle
    assert "text/plain" not in script.text  # the server refuses non-JSON posts (issue 13 item 2)
    assert "Bearer" in http.get("/debug-ui/auth.js").text
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
    with raises_kind(RequestError, "invalid_replay_request") as info:
        store.run("escape")
    assert type(info.value) is RequestError and status_of(info.value) == 400  # malformed, not "not found"


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


# ---------------------------------------------------------------- issue 13 item 5: confinement, bounded cache, pages


def test_symlinked_artifacts_leading_outside_the_runs_directory_are_refused(tmp_path, prepared_dir):
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2"}', "utf-8")
    outside_traces = tmp_path / "outside.jsonl"
    outside_traces.write_text('{"episode_id": "leak", "steps": []}\n', "utf-8")
    runs = tmp_path / "runs"
    run = runs / "x"
    run.mkdir(parents=True)
    (run / "manifest.json").symlink_to(secret)
    (run / "traces.jsonl").symlink_to(outside_traces)
    (run / "summary.json").write_text('{"ok": true}', "utf-8")
    store = RunsStore(runs)
    shown = store.run("x")
    assert shown["manifest"] is None and shown["artifacts"]["manifest.json"]["present"] is False
    assert "outside" in shown["artifacts"]["manifest.json"]["refused"]
    assert shown["episodes"] == [] and shown["artifact_summary"] == {"ok": True}
    with raises_kind(RequestError, "replay_not_found"):
        store.episode("x", "leak")
    with serve(create_app(ShopWorld.from_data_dir(prepared_dir), slots=1, runs_dir=runs)) as url:
        body = httpx.get(f"{url}/api/runs/x").text
    assert "hunter2" not in body and "leak" not in body
    (run / "summary.json").unlink()
    only_links = RunsStore(runs)
    assert only_links.list_runs()["runs"] == []  # a run of nothing but outside links is no run


def test_the_trace_cache_is_bounded(tmp_path):
    runs = tmp_path / "runs"
    line = json.dumps({"episode_id": "e", "job": {"task_id": 0, "sample_id": 0}, "steps": [], "pad": "x" * 900})
    for name in ("a", "b", "c"):
        (runs / name).mkdir(parents=True)
        (runs / name / "traces.jsonl").write_text((line + "\n") * 10, "utf-8")  # ~9.3 kB each
    store = RunsStore(runs, max_cached_bytes=20_000)
    for name in ("a", "b", "c", "a"):
        assert store.run(name)["trace_index"]["records"] == 10
        assert store.cached_bytes <= 20_000
    assert len(store._cache) == 2
    tiny = RunsStore(runs, max_cached_bytes=1_000)  # a file over the bound is parsed, not kept
    assert tiny.run("a")["trace_index"]["records"] == 10 and tiny.cached_bytes == 0


def test_v1_tasks_is_paginated(http):
    first = http.get("/v1/tasks", params={"limit": 2}).json()
    assert len(first["tasks"]) == 2 and first["offset"] == 0 and first["next_offset"] == 2
    total, seen, offset = first["total"], [], 0
    while offset is not None:
        page = http.get("/v1/tasks", params={"offset": offset, "limit": 2}).json()
        seen += [task["task_id"] for task in page["tasks"]]
        offset = page["next_offset"]
    assert len(seen) == total == len(set(seen)) and seen == sorted(seen)
    assert http.get("/v1/tasks", params={"limit": 100_000}).status_code == 422
    assert len(http.get("/v1/tasks").json()["tasks"]) == min(total, 500)


# ---------------------------------------------------------------- issue 16 item 7: dialogue episodes


def _dialogue_trace() -> dict:
    steps = [
        {"step_index": 1, "action": "ask_user[预算？]", "dialogue": {"question": "预算？", "reply": "500元左右。", "valid": True},
         "environment": {"action_feedback": {"valid": True}, "shopper_reply": "500元左右。"}},
        {"step_index": 2, "action": None, "protocol_error": {"code": "invalid_tool_arguments"}, "environment": None},
        {"step_index": 3, "action": "ASK_USER[]", "dialogue": {"question": "", "reply": None, "valid": False},
         "environment": {"action_feedback": {"valid": False, "reason": "empty_argument"}, "shopper_reply": None}},
        {"step_index": 4, "action": "search[冰箱]", "environment": {"action_feedback": {"valid": True}}},
    ]
    return {"episode_id": "e", "job": {"task_id": 3}, "status": "completed",
            "reset": {"task_instruction": "", "shopper": "rule", "shopper_version": "v", "shopper_opening": "你好。"},
            "steps": steps, "final": {"done": True},
            "dialogue": {"shopper": "rule", "shopper_version": "v", "opening": "你好。", "transcript": [{"slots": ["budget"]}],
                         "turns": [dict(s["dialogue"], step_index=s["step_index"]) for s in steps if "dialogue" in s]}}


def test_dialogue_view_reads_the_trace_block_or_the_steps():
    from shopsimrl.server.replay import dialogue_view, episode_summary

    record = _dialogue_trace()
    expected = {"shopper": "rule", "shopper_version": "v", "opening": "你好。", "turns": [
        {"step_index": 1, "question": "预算？", "reply": "500元左右。", "valid": True},
        {"step_index": 3, "question": "", "reply": None, "valid": False}]}
    assert dialogue_view(record) == expected  # the private transcript is not part of it
    failed = {**record, "dialogue": None, "status": "failed"}  # a failed episode has no block: read the steps
    assert dialogue_view(failed) == expected
    bare = {**failed, "steps": [{k: v for k, v in s.items() if k != "dialogue"} for s in record["steps"]]}
    assert dialogue_view(bare) == expected  # older traces: the ask_user action and the shopper_reply
    assert episode_summary(record)["questions"] == 2 and episode_summary(record)["shopper"] == "rule"
    plain = {**bare, "reset": {"task_instruction": "买个冰箱"}}
    assert dialogue_view(plain) is None and episode_summary(plain)["questions"] is None


def test_the_episode_api_carries_the_dialogue_view(tmp_path):
    run = tmp_path / "dlg"
    run.mkdir()
    (run / "traces.jsonl").write_text(json.dumps(_dialogue_trace(), ensure_ascii=False) + "\n", "utf-8")
    store = RunsStore(tmp_path)
    payload = store.episode("dlg", "e")
    assert [turn["question"] for turn in payload["dialogue"]["turns"]] == ["预算？", ""]
    assert "transcript" not in payload["dialogue"]
    assert store.run("dlg")["episodes"][0]["questions"] == 2


def test_dialogue_view_never_raises_on_malformed_traces():
    """Trace files are input: any JSON shape gives a view or None, never an exception (hypothesis)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from shopsimrl.server.replay import dialogue_view, episode_summary

    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                     st.sampled_from(["ask_user[预算？]", "ASK_USER[]", "ask_user[", "search[x]"]))
    json_values = st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["question", "reply", "valid", "step_index", "action", "dialogue", "turns",
                                         "environment", "shopper_reply", "action_feedback", "shopper", "opening"]),
                        inner, max_size=5)), max_leaves=20)
    records = st.fixed_dictionaries({}, optional={
        "episode_id": st.text(max_size=5), "dialogue": json_values, "reset": json_values, "steps": json_values,
        "final": json_values, "job": json_values})

    @settings(max_examples=300, deadline=None)
    @given(record=records)
    def check(record):
        view = dialogue_view(record)
        assert view is None or isinstance(view["turns"], list)
        if view is not None:
            assert all(set(turn) == {"step_index", "question", "reply", "valid"} for turn in view["turns"])
        assert episode_summary(record)["questions"] == (None if view is None else len(view["turns"]))

    check()
