"""``eval --out``: a directory without a manifest of its own is never adopted, nor are its files overwritten."""

from __future__ import annotations

import json
import os
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


@pytest.fixture(scope="module")
def random_run(prepared_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("random") / "run"
    assert _eval(prepared_dir, out, "random") == 0
    return out


def _snapshot(root):
    """Each entry's kind and content (a link by its target, so a dangling one is compared too)."""
    return {p.name: ("link", os.readlink(p)) if p.is_symlink() else ("dir",) if p.is_dir() else ("file", p.read_bytes())
            for p in root.iterdir()}


@pytest.mark.parametrize("kind", ["dangling", "link-to-a-matching-manifest", "directory"])
def test_only_a_regular_manifest_of_its_own_adopts_a_directory(prepared_dir, oracle_run, random_run, tmp_path,
                                                               capsys, kind):
    """Foreign traces beside a manifest.json that is a dangling link, a link to another run's manifest of the
    same plan, or a directory: refused, nothing written; --force starts the run over as its own."""
    target = tmp_path / "mine"
    target.mkdir()
    shutil.copy(oracle_run / "traces.jsonl", target / "traces.jsonl")  # 100 % purchases: not this plan's
    manifest = target / "manifest.json"
    if kind == "dangling":
        manifest.symlink_to(tmp_path / "nowhere" / "manifest.json")
    elif kind == "directory":
        manifest.mkdir()
    else:
        manifest.symlink_to(random_run / "manifest.json")
    before = _snapshot(target)
    capsys.readouterr()
    assert _eval(prepared_dir, target, "random") == 2
    err = capsys.readouterr().err
    assert "manifest.json" in err and ("symbolic link" in err or "is a directory" in err), err
    assert _snapshot(target) == before
    if kind != "directory":
        assert _eval(prepared_dir, target, "random", "--force") == 0
        assert manifest.is_file() and not manifest.is_symlink()
        summary = json.loads((target / "summary.json").read_text())
        assert summary["primary"] == json.loads((random_run / "summary.json").read_text())["primary"]
