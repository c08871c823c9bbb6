"""Newcomer-facing CLI messages (issue 18 items 7 and 12): early argument/split errors and plain causes."""

from __future__ import annotations

import json
import socket

import pytest

from error_kinds import raises_kind
from shopsimrl.agent.skills import SkillBank
from shopsimrl.catalog import Catalog
from shopsimrl.cli import main
from shopsimrl.errors import DataError


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


@pytest.mark.parametrize("command", ["serve", "serve-openenv", "policy-server"])
def test_every_server_on_a_busy_port_fails_with_one_line_before_any_banner(prepared_dir, command):
    """Issue 28 item 2: the whole output is one line naming --port (no banner, no uvicorn traceback)."""
    import subprocess
    import sys

    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "shopsimrl.cli", command, "--data", str(prepared_dir), "--port", str(port)],
            capture_output=True, text=True, timeout=120,
        )
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == 2, output
    assert output.count("\n") == 0, output
    assert f"cannot listen on 127.0.0.1:{port}" in output and "--port" in output
    assert "serving" not in output and "Errno" not in output


@pytest.mark.parametrize("command", ["serve", "serve-openenv", "policy-server"])
@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_every_server_refuses_a_port_out_of_range_in_one_line(command, port, capsys, no_catalog_open):
    """Issue 45 item 2: 99999 was accepted and listened on 34463 (mod 65536); now one line, before the catalog."""
    assert main([command, "--port", port]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert f"--port {port} is not a TCP port: use 0-65535" in captured.err


@pytest.mark.parametrize(("command", "path"), [("serve", "/healthz"), ("policy-server", "/v1/models")])
def test_port_zero_serves_on_a_free_port_that_the_banner_names(prepared_dir, command, path):
    """Issue 45 item 2: --port 0 picks a free port; the banner prints the port actually listened on."""
    import re
    import subprocess
    import sys
    import time

    import httpx

    server = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", command, "--data", str(prepared_dir),
                               "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
        assert match and int(match.group(1)) > 0, banner
        url = f"http://127.0.0.1:{match.group(1)}{path}"
        deadline = time.monotonic() + 60
        while True:
            try:
                assert httpx.get(url, timeout=5).status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, banner
                time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=30)


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
    with raises_kind(DataError, "skill_bank", match=message):
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
    assert "ModelCallError" in line and f"http://127.0.0.1:{port}/v1" in line and "Connect" in line


def test_a_dead_env_url_stops_at_the_first_connection_with_one_line(prepared_dir, tmp_path, capsys):
    """Issue 45 item 7: --env-url to a dead server retried every task; now one line before any episode runs."""
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    out = tmp_path / "run"
    code = main(["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "heuristic",
                 "--env-url", f"http://127.0.0.1:{port}", "--out", str(out), "--no-progress", "--no-report"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", captured.out
    assert captured.err.count("\n") == 1, captured.err
    assert f"--env-url http://127.0.0.1:{port} cannot be reached (ConnectError" in captured.err
    assert "shopsimrl serve" in captured.err
    assert not (out / "traces.jsonl").exists()  # no episode was tried


def test_no_persona_overrides_a_persona_split_and_the_plan_records_it(prepared_dir, tmp_path):
    """Issue 28 item 3: --no-persona is an override (the plain instruction), recorded as persona_override."""
    out = tmp_path / "plain"
    assert main(["eval", "--data", str(prepared_dir), "--split", "test", "--no-persona", "--policy", "heuristic",
                 "--limit", "2", "--out", str(out), "--no-progress", "--no-report"]) in (0, 1)
    plan = json.loads((out / "manifest.json").read_text("utf-8"))["plan"]
    assert plan["task_split"]["persona"] is False and plan["task_split"]["persona_override"] is True
    records = [json.loads(line) for line in (out / "traces.jsonl").read_text("utf-8").splitlines()]
    assert records and all(r["reset"]["task_mode"] == "standard" and r["reset"]["user_persona"] == {}
                           for r in records)
    default = tmp_path / "own"
    assert main(["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "heuristic",
                 "--limit", "2", "--out", str(default), "--no-progress", "--no-report"]) in (0, 1)
    own = json.loads((default / "manifest.json").read_text("utf-8"))["plan"]["task_split"]
    assert own["persona"] is True and "persona_override" not in own


@pytest.mark.parametrize("argv", [["data", "info", "{data}"], ["data", "search", "{data}", "床"]])
def test_a_reader_that_leaves_early_is_not_an_error(prepared_dir, argv):
    """Issue 28 item 4: `shopsimrl data info DIR | head` used to print a broken-pipe error."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "shopsimrl.cli", *[a.format(data=prepared_dir) for a in argv]]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        process.stdout.close()  # the reader is gone before the first line is written
        err = process.stderr.read().decode()
        code = process.wait(timeout=120)
    assert err == "" and code == 0, (code, err)


def test_the_documented_annotation_record_is_valid_and_every_format_error_shows_it(tmp_path):
    """Issue 28 item 4: the record format is learnt from the first error, not one field at a time."""
    import re
    from pathlib import Path

    from shopsimrl.budget.annotations import EXAMPLE_RECORD, load_budget_annotations
    from shopsimrl.errors import DataError

    contract = (Path(__file__).resolve().parents[1] / "docs" / "contract.md").read_text("utf-8")
    documented = re.search(r"one valid record:\n\n```json\n(.+)\n```", contract).group(1)
    assert json.loads(documented) == json.loads(EXAMPLE_RECORD)
    good = tmp_path / "good.json"
    good.write_text(f"[{documented}]", "utf-8")
    assert load_budget_annotations(good) == {0: 1100.0}
    for bad in ([{"task_id": 0}], {"task_id": 0}, [{"task_id": 0, "kind": "hard_upper", "amount": 5}]):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad), "utf-8")
        with raises_kind(DataError, "archive") as error:
            load_budget_annotations(path)
        assert EXAMPLE_RECORD in str(error.value)
