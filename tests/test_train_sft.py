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


@pytest.mark.parametrize("name", ["sft.csv", "sft", "sft.json"])
def test_export_refuses_an_unknown_output_format(oracle_run: Path, tmp_path: Path, capsys, name: str) -> None:
    out = tmp_path / name
    assert main(["export-sft", str(oracle_run), "--out", str(out)]) == 2
    assert "unknown output format" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("value", ["2", "-0.5"])
def test_export_refuses_a_min_reward_outside_the_reward_range(oracle_run: Path, tmp_path: Path, capsys,
                                                               value: str) -> None:
    out = tmp_path / "sft.jsonl"
    assert main(["export-sft", str(oracle_run), "--min-reward", value, "--out", str(out)]) == 2
    assert "--min-reward must be between 0 and 1" in capsys.readouterr().err
    assert not out.exists()


def test_export_warns_when_no_episode_qualifies(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "traces.jsonl").write_text("", "utf-8")
    out = tmp_path / "sft.jsonl"
    assert main(["export-sft", str(run), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: no completed episode" in err and out.read_text("utf-8") == ""


@pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="datasets (train extra) not installed")
def test_parquet_export_keeps_turn_tools(oracle_run: Path, tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "sft.parquet"
    jsonl = tmp_path / "sft.jsonl"
    assert main(["export-sft", str(oracle_run), "--out", str(out)]) == 0
    assert main(["export-sft", str(oracle_run), "--out", str(jsonl)]) == 0
    table = datasets.Dataset.from_parquet(str(out))
    expected = [json.loads(line) for line in jsonl.read_text("utf-8").splitlines()]
    assert set(table.column_names) == {"messages", "tools", "turn_tools", "metadata"}
    assert [json.loads(t) for t in table["turn_tools"]] == [r["turn_tools"] for r in expected]
    assert [json.loads(m) for m in table["metadata"]] == [r["metadata"] for r in expected]
