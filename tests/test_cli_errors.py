"""Bad input on the command line gives one typed error line, never a traceback (issue 13 item 8)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl.cli import main

FIXTURE = Path(__file__).parent / "data" / "fixture_catalog.json"


def _one_line_error(capsys, argv: list[str], expected: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("shopsimrl: error: ") and expected in err[-1], err
    assert not any("Traceback" in line for line in err)


@pytest.fixture
def data_copy(prepared_dir, tmp_path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(prepared_dir, copy)
    return copy


@pytest.mark.parametrize(("name", "expected"), [
    ("manifest.json", "is not valid JSON: line 1 column 12"),
    ("task_splits.json", "is not valid JSON: line 1 column 12"),  # read by the early split check
    ("persona_splits.json", "does not match its manifest"),  # opening checks every file's size and SHA-256
])
def test_bad_json_in_a_data_directory(capsys, data_copy, tmp_path, name, expected):
    (data_copy / name).write_text('{"splits": ', "utf-8")
    argv = ["eval", "--data", str(data_copy), "--policy", "heuristic", "--out", str(tmp_path / "r"), "--no-progress"]
    _one_line_error(capsys, argv, f"{name} {expected}")
    assert not (tmp_path / "r").exists()


def test_a_manifest_that_is_a_directory(capsys, data_copy, tmp_path):
    (data_copy / "manifest.json").unlink()
    (data_copy / "manifest.json").mkdir()
    _one_line_error(capsys, ["data", "info", str(data_copy)], "manifest.json is a directory")
    argv = ["eval", "--data", str(data_copy), "--policy", "heuristic", "--out", str(tmp_path / "r"), "--no-progress"]
    _one_line_error(capsys, argv, "manifest.json is a directory")
    run = tmp_path / "run"
    (run / "manifest.json").mkdir(parents=True)
    for argv in (["report", str(run)], ["compare", str(run), str(run)]):
        _one_line_error(capsys, argv, "manifest.json is a directory")


def test_a_run_directory_whose_manifest_lacks_its_plan(capsys, prepared_dir, tmp_path):
    run = tmp_path / "run"
    argv = ["eval", "--data", str(prepared_dir), "--split", "test", "--policy", "heuristic", "--out", str(run),
            "--no-progress", "--no-report"]
    assert main(argv) == 0
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["plan"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    summary = (run / "summary.json").read_bytes()
    capsys.readouterr()
    _one_line_error(capsys, argv, "manifest.json has no plan")
    assert (run / "summary.json").read_bytes() == summary


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda text: text[:-1] + "," + "[" * 50_000 + "]" * 50_000 + "]", "nested too deeply"),
        (lambda text: text.replace('"title": "', '"title": "\\ud800', 1), "lone surrogate U+D800"),
        (lambda text: text.replace('"pricing": [800.0, 1350.0]', '"pricing": [-800.0, 1350.0]', 1),
         "field 'pricing': must be a list of finite numbers ≥ 0"),
        (lambda text: text.replace('"pricing": [800.0, 1350.0]', '"pricing": [0, 0]', 1), "only zero prices"),
    ],
)
def test_hostile_archives_give_one_line(capsys, tmp_path, edit, expected):
    archive = tmp_path / "archive.json"
    archive.write_text(edit(json.dumps(json.loads(FIXTURE.read_text("utf-8")), ensure_ascii=False)), "utf-8")
    _one_line_error(capsys, ["data", "prepare", "--archive", str(archive), "--out", str(tmp_path / "out")], expected)


def test_read_json_file_names_the_file_for_every_failure(tmp_path):
    from shopsimrl.errors import DataError
    from shopsimrl.jsonfile import read_json_file

    path = tmp_path / "f.json"
    cases = [
        (None, "f.json is missing"),
        (b"\xff\xfe{}", "f.json is not UTF-8 (byte 0)"),
        (b'{"a": [1,', "f.json is not valid JSON: line 1 column 10"),
        (b"[" * 100_000 + b"]" * 100_000, "f.json is not valid JSON: nested too deeply"),
        (b"[1, 2]", "f.json must hold a JSON object, not array"),
    ]
    for content, message in cases:
        path.unlink(missing_ok=True)
        if content is not None:
            path.write_bytes(content)
        with raises_kind(DataError, "data_file") as info:
            read_json_file(path)
        assert message in str(info.value) and "\n" not in str(info.value)
    path.write_bytes(b'{"ok": 1}')
    assert read_json_file(path) == {"ok": 1}


def test_an_output_manifest_that_is_a_directory_is_one_line(capsys, tmp_path):
    out = tmp_path / "out"
    (out / "manifest.json").mkdir(parents=True)
    argv = ["data", "prepare", "--archive", str(FIXTURE), "--out", str(out), "--test-size", "2", "--val-size", "2",
            "--force"]
    _one_line_error(capsys, argv, "Is a directory")


def test_prepare_over_a_data_directory_with_a_non_utf8_manifest(capsys, data_copy):
    (data_copy / "manifest.json").write_bytes(b"\xff\xfe not json")
    argv = ["data", "prepare", "--archive", str(FIXTURE), "--out", str(data_copy), "--test-size", "2", "--val-size",
            "2"]
    _one_line_error(capsys, argv, "already holds other data; pass --force")
