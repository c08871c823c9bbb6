"""``eval --out``: a directory without a manifest of its own is never adopted, nor are its files overwritten."""

from __future__ import annotations

import json
import shutil

import pytest

from shopsimrl.cli import main


def _eval(data, out, policy, *extra):
    return main(["eval", "--data", str(data), "--split", "all", "--policy", policy, "--out", str(out),
                 "--no-progress", "--no-report", *extra])


@pytest.fixture(scope="module")
def oracle_run(prepared_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle") / "run"
    assert _eval(prepared_dir, out, "oracle") == 0
    return out


def test_foreign_traces_are_refused_not_adopted(prepared_dir, oracle_run, tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    shutil.copy(oracle_run / "traces.jsonl", target / "traces.jsonl")  # someone else's traces, no manifest
    (target / "summary.json").write_text('{"mine": true}\n')
    (target / "report.md").write_text("my notes\n")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    capsys.readouterr()
    assert _eval(prepared_dir, target, "random") == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "manifest.json" in err and "--force" in err
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before  # nothing written, nothing adopted


def test_force_replaces_run_artifacts_and_the_run_is_its_own(prepared_dir, oracle_run, tmp_path, capsys):
    target, fresh = tmp_path / "mine", tmp_path / "fresh"
    target.mkdir()
    shutil.copy(oracle_run / "traces.jsonl", target / "traces.jsonl")
    assert _eval(prepared_dir, target, "random", "--force") == 0
    assert _eval(prepared_dir, fresh, "random") == 0
    ours = json.loads((target / "summary.json").read_text())
    assert ours["counts"] == json.loads((fresh / "summary.json").read_text())["counts"]
    oracle = json.loads((oracle_run / "summary.json").read_text())
    assert ours["primary"] == json.loads((fresh / "summary.json").read_text())["primary"]
    assert ours["primary"] != oracle["primary"]  # not the oracle's 100 %


def test_user_files_are_never_removed_even_with_force(prepared_dir, tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me\n")
    for extra in ((), ("--force",)):
        capsys.readouterr()
        assert _eval(prepared_dir, target, "random", *extra) == 2
        err = capsys.readouterr().err
        assert "notes.txt" in err and "--force" not in err
    assert [p.name for p in target.iterdir()] == ["notes.txt"]


def test_an_empty_or_own_directory_is_used(prepared_dir, tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    assert _eval(prepared_dir, target, "random") == 0
    assert _eval(prepared_dir, target, "random") == 0  # a resume of its own plan
