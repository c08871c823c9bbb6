"""Ray evaluation: a local Ray instance (2 CPUs) gives the local runner's traces and summary, resumes and retries
in the same run directory, and refuses workers that built another plan."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from live_server import serve, unavailable_service
from shopsimrl.cli import main
from shopsimrl.env import ShopWorld
from shopsimrl.eval import EvalSettings, evaluate
from shopsimrl.eval.rundir import latest_records

VOLATILE = ("started_at", "ended_at", "duration_ms", "latency_ms")


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def _volatile_free(value):
    if isinstance(value, dict):
        return {k: _volatile_free(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_volatile_free(v) for v in value]
    return value


def _traces(run: Path) -> dict[str, dict]:
    return {eid: _volatile_free(r) for eid, r in latest_records(run / "traces.jsonl").items()}


def _summary(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    summary["cost"].pop("duration_ms_mean")
    return summary


def test_ray_run_equals_local_run_and_resumes(local_ray, prepared_dir, tmp_path):
    world = ShopWorld.from_data_dir(prepared_dir)
    common = dict(data=str(prepared_dir), split="all", policy="heuristic", concurrency=3,
                  experiment="same")
    local = evaluate(EvalSettings(out=str(tmp_path / "local"), **common), world=world)
    remote = evaluate(EvalSettings(out=str(tmp_path / "ray"), ray="", **common), world=world)
    expected = len(world.catalog.split("all"))
    assert remote.extra["ray_workers"] == 2 and remote.ran == expected
    assert remote.stats.episodes == expected and remote.stats.turns > expected
    a, b = _traces(tmp_path / "local"), _traces(tmp_path / "ray")
    assert len(a) == expected and set(a) == set(b)
    for eid in a:
        assert a[eid] == b[eid], eid
    assert local.plan.fingerprint == remote.plan.fingerprint
    assert _summary(tmp_path / "local") == _summary(tmp_path / "ray")
    assert remote.summary["counts"]["completed"] == expected

    # resume on Ray: drop the last two lines (as a kill would), only those episodes run again
    traces = tmp_path / "ray" / "traces.jsonl"
    lines = traces.read_text().splitlines(keepends=True)
    traces.write_text("".join(lines[:-2]))
    again = evaluate(EvalSettings(out=str(tmp_path / "ray"), ray="", **common), world=world)
    assert again.resumed and again.ran == 2 and again.skipped == expected - 2
    assert _traces(tmp_path / "ray") == b and _summary(tmp_path / "ray") == _summary(tmp_path / "local")


def test_ray_technical_failures_are_retried(local_ray, prepared_dir, tmp_path):
    # every worker's environment is a service whose resets all fail: three attempts per episode, all in the
    # driver's file (a service not there at all stops before the first episode: test_eval.py)
    out = tmp_path / "dead"
    with serve(unavailable_service) as url:
        result = evaluate(EvalSettings(data=str(prepared_dir), out=str(out), split="test", policy="heuristic",
                                       env_url=url, env_timeout=2.0, ray="", concurrency=1))
    lines = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(lines) == 3 * 2 and all(r["status"] == "failed" and r["error"]["stage"] == "reset" for r in lines)
    assert result.summary["counts"]["failed"] == 2


def test_ray_workers_must_see_the_same_data(local_ray, prepared_dir, tmp_path):
    import shutil

    from shopsimrl.errors import ShopSimError

    # the workers' copy of the data directory declares another catalog schema: the workers refuse to open it
    # (or, were it opened, would build another plan); one line says why, nothing runs
    other = tmp_path / "other-data"
    shutil.copytree(prepared_dir, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["schema_version"] = "another-schema"
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShopSimError, match=r"another plan|schema_version 'another-schema'") as caught:
        evaluate(EvalSettings(data=str(prepared_dir), out=str(tmp_path / "skew"), split="test",
                              policy="heuristic", ray="", ray_data=str(other), concurrency=1))
    assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value)
    assert not (tmp_path / "skew" / "traces.jsonl").exists()


def test_cli_eval_on_ray(local_ray, prepared_dir, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "oracle", "--ray",
                 "--concurrency", "1", "--out", str(out), "--no-progress", "--no-report"]) == 0
    assert "ray:     1 workers" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["completed"] == 2 and summary["primary"]["success_rate"] == 1.0


def test_ray_missing_names_the_extra(prepared_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    assert main(["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "heuristic", "--ray",
                 "--out", str(tmp_path / "none"), "--no-progress", "--no-report"]) == 2
    assert "shopsimrl[ray]" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_served_model_on_ray_each_worker_has_its_own_client(local_ray, prepared_dir, tmp_path, monkeypatch):
    from live_server import serve
    from shopsimrl.agent.model_client import ModelSettings
    from shopsimrl.agent.policy_server import create_policy_app

    world = ShopWorld.from_data_dir(prepared_dir)
    app = create_policy_app(world, policy="heuristic")
    seen: list[str] = []

    async def recording(scope, receive, send):  # who called, with which key (the workers, not the driver)
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            seen.append(headers.get(b"authorization", b"").decode())
        await app(scope, receive, send)

    # set after Ray started: the workers only see the key because the pool forwards the named variable
    monkeypatch.setenv("SHOPSIM_TEST_KEY", "sk-ray-test")
    with serve(recording) as url:
        model = ModelSettings(base_url=f"{url}/v1", model="shopsim-heuristic", api_key_env="SHOPSIM_TEST_KEY")
        common = dict(data=str(prepared_dir), split="test", model=model, concurrency=4, experiment="same")
        remote = evaluate(EvalSettings(out=str(tmp_path / "ray"), ray="", **common), world=world)
        assert remote.extra["ray_workers"] == 2 and remote.summary["counts"]["completed"] == 2
        assert len(seen) >= 2 * 2 and set(seen) == {"Bearer sk-ray-test"}  # >= 2 turns per episode
        evaluate(EvalSettings(out=str(tmp_path / "local"), **common), world=world)
    a, b = _traces(tmp_path / "local"), _traces(tmp_path / "ray")
    assert a == b and _summary(tmp_path / "local") == _summary(tmp_path / "ray")
