"""Newcomer-facing CLI messages (issue 18 items 7 and 12): early argument/split errors and plain causes."""

from __future__ import annotations

import json
import socket

import pytest

from shopsimrl.agent.skills import SkillBank, SkillBankError
from shopsimrl.catalog import Catalog
from shopsimrl.cli import main


@pytest.fixture
def no_catalog_open(monkeypatch):
    """Fails the test if a command opens the catalog (the slow part) before reporting a usage mistake."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the catalog was opened before the argument check")

    monkeypatch.setattr(Catalog, "from_data_dir", classmethod(refuse))


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "--data", "{data}", "--split", "tset", "--policy", "heuristic", "--out", "{tmp}/run", "--no-progress"],
        ["data", "eval-search", "{data}", "--split", "tset"],
    ],
)
def test_split_errors_come_before_the_catalog_is_opened(prepared_dir, tmp_path, capsys, no_catalog_open, argv):
    argv = [a.format(data=prepared_dir, tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown task split 'tset'" in err and "test" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--data", "{data}", "--split", "standard", "--persona", "--policy", "heuristic"],
         "holds standard tasks only"),
        (["eval", "--data", "{data}", "--split", "test", "--policy", "heuristic", "--skills", "{tmp}/none.json"],
         "cannot read skill bank"),
        (["export-sft", "{tmp}", "--out", "{tmp}/x.csv"], "unknown output format"),
    ],
)
def test_other_argument_errors_come_before_the_catalog_is_opened(prepared_dir, tmp_path, capsys, no_catalog_open,
                                                                  argv, message):
    argv = [a.format(data=prepared_dir, tmp=tmp_path) for a in argv]
    assert main([*argv, "--out", str(tmp_path / "run")] if argv[0] == "eval" else argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["data", "search", "{missing}", "床"],
        ["data", "stats", "{missing}"],
        ["eval", "--data", "{missing}", "--policy", "heuristic", "--out", "{missing}-run"],
        ["serve", "--data", "{missing}"],
    ],
)
def test_a_missing_data_directory_suggests_build_default(tmp_path, capsys, no_catalog_open, argv):
    argv = [a.format(missing=tmp_path / "nope") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not a prepared data directory" in err and "shopsimrl data build-default" in err and "make run" in err


@pytest.mark.parametrize("k", ["0", "-3"])
def test_search_k_below_one_is_a_usage_error(prepared_dir, capsys, k):
    with pytest.raises(SystemExit) as exit_:
        main(["data", "search", str(prepared_dir), "床", "--k", k])
    assert exit_.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_serve_on_a_busy_port_fails_before_announcing(prepared_dir, capsys):
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--data", str(prepared_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert "serving" not in err


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"skills": [{"id": "a", "version": "1", "content": "x"}]}, "schema_version is missing"),
        ([{"id": "a", "version": "1", "content": "x"}], "expected an object"),
        ({"schema_version": "v0", "skills": []}, "schema_version must be"),
    ],
)
def test_a_skill_bank_without_its_schema_version_is_refused(tmp_path, payload, message):
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps(payload), "utf-8")
    with pytest.raises(SkillBankError, match=message):
        SkillBank.load(bank)


def test_a_dead_model_endpoint_reports_its_first_cause(prepared_dir, tmp_path, capsys):
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    code = main(["eval", "--data", str(prepared_dir), "--split", "test", "--base-url", f"http://127.0.0.1:{port}/v1",
                 "--model", "m", "--max-retries", "0", "--limit", "1", "--out", str(tmp_path / "run"),
                 "--no-progress", "--no-report"])
    assert code == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("first failure:"))
    assert "ModelRequestError" in line and f"http://127.0.0.1:{port}/v1" in line and "Connect" in line
