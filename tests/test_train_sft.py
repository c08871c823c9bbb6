"""SFT export from a real evaluator run (the oracle on the fixture catalog)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from shopsimrl.cli import main


@pytest.fixture(scope="module")
def oracle_run(prepared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "oracle"
    main(["eval", "--data", str(prepared_dir), "--policy", "oracle", "--split", "all", "--out", str(out),
          "--no-progress", "--no-report"])
    assert (out / "traces.jsonl").is_file()
    return out


def _traces(run: Path) -> dict:
    return {r["episode_id"]: r for r in map(json.loads, (run / "traces.jsonl").read_text("utf-8").splitlines())}


def test_export_keeps_only_successful_episodes_with_their_tools(oracle_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "sft.jsonl"
    assert main(["export-sft", str(oracle_run), "--min-reward", "1", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    traces = _traces(oracle_run)
    winners = [t for t in traces.values() if t["final"]["reward_detail"]["r_strict"] >= 1]
    assert 0 < len(records) == len(winners) < len(traces)  # the fixture has a task the oracle cannot win
    for record in records:
        trace = traces[record["metadata"]["episode_id"]]
        assert record["messages"][0]["role"] == "system" and record["messages"][1]["role"] == "user"
        assert record["messages"][-1]["role"] == "assistant"
        assert record["messages"][-1]["tool_calls"][0]["function"]["name"] == "click"
        assert record["messages"] == trace["conversation"][: len(record["messages"])]
        assert record["tools"] == trace["steps"][-1]["tools"]
        assert len(record["turn_tools"]) == sum(1 for s in trace["steps"] if s["action"])
        assert record["metadata"]["r_strict"] == 1.0


def test_turn_records_carry_each_turns_tools(oracle_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "turns.jsonl"
    assert main(["export-sft", str(oracle_run), "--min-reward", "0", "--out", str(out), "--granularity", "turn"]) == 0
    records = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    first = records[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["search"]
    assert first["messages"][-1]["tool_calls"][0]["function"]["name"] == "search"
    assert len(records) == sum(len(t["steps"]) for t in _traces(oracle_run).values())


def test_export_refuses_a_directory_without_traces(tmp_path: Path, capsys) -> None:
    assert main(["export-sft", str(tmp_path), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "not a run directory" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="datasets (train extra) not installed")
def test_parquet_export_round_trips(oracle_run: Path, tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "sft.parquet"
    assert main(["export-sft", str(oracle_run), "--out", str(out)]) == 0
    table = datasets.Dataset.from_parquet(str(out))
    jsonl = tmp_path / "sft.jsonl"
    main(["export-sft", str(oracle_run), "--out", str(jsonl)])
    expected = [json.loads(line) for line in jsonl.read_text("utf-8").splitlines()]
    assert len(table) == len(expected)
    assert [json.loads(m) for m in table["messages"]] == [r["messages"] for r in expected]
