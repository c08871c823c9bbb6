"""The default catalog in the per-user cache: where it lives, its key, first-use build, concurrency, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.cli import main
from shopsimrl.generate import GENERATOR_VERSION, GeneratorConfig, user_cache
from shopsimrl.generate.default import build_default_catalog
from shopsimrl.generate.user_cache import (
    CACHE_ENV,
    COMPLETE_FILE,
    BuildEvents,
    cache_root,
    default_catalog_dir,
    ensure_default_catalog,
    is_complete,
)

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
ROOT = Path(__file__).resolve().parents[1]


def test_cache_root_follows_the_override_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_ENV)
    assert cache_root() == tmp_path / "xdg" / "shopsimrl"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # the spec: a relative value is ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "shopsimrl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == tmp_path / "home" / ".cache" / "shopsimrl"


def test_the_key_follows_the_generator_version_and_seed(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    here = default_catalog_dir()
    assert here.parent == tmp_path / "catalogs"
    assert GENERATOR_VERSION.removeprefix("shopsimrl-catalog-") in here.name
    assert default_catalog_dir(seed=1) != here
    assert default_catalog_dir(config=SMALL) != here
    monkeypatch.setattr(user_cache, "GENERATOR_VERSION", "shopsimrl-catalog-generator-v99")
    assert default_catalog_dir() != here and "v99" in default_catalog_dir().name


def test_first_use_builds_once_then_opens_the_finished_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    stages: list[str] = []
    written: list[int] = []
    events = BuildEvents(stage=stages.append, generated=written.append)
    path = ensure_default_catalog(config=SMALL, events=events)
    assert path == default_catalog_dir(config=SMALL) and is_complete(path, config=SMALL)
    assert any(s.startswith("generating") for s in stages) and sum(written) == SMALL.products
    stages.clear()
    assert ensure_default_catalog(config=SMALL, events=events) == path
    assert stages == []  # nothing regenerated, nothing re-prepared, no lock taken
    # a build killed before its marker was written is finished by the next call, not trusted as is
    (path / COMPLETE_FILE).unlink()
    assert not is_complete(path, config=SMALL)
    ensure_default_catalog(config=SMALL, events=events)
    assert is_complete(path, config=SMALL)
    assert not any(s.startswith("generating") for s in stages)  # the archive was current: only checked


def test_a_marker_of_another_generator_version_is_not_trusted(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    path = ensure_default_catalog(config=SMALL)
    marker = json.loads((path / COMPLETE_FILE).read_text("utf-8"))
    (path / COMPLETE_FILE).write_text(json.dumps({**marker, "generator_version": "older"}), "utf-8")
    assert not is_complete(path, config=SMALL)


CHILD = """
import sys, time
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.user_cache import BuildEvents, ensure_default_catalog
config = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
events = BuildEvents(stage=lambda m: print("stage", m, flush=True), waiting=lambda: print("waiting", flush=True))
print("path", ensure_default_catalog(config=config, events=events), flush=True)
"""


def test_two_processes_starting_at_once_build_it_once(tmp_path):
    env = {**os.environ, CACHE_ENV: str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    children = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    outputs = [child.communicate(timeout=300)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    paths = {line for out in outputs for line in out.splitlines() if line.startswith("path ")}
    assert len(paths) == 1
    generating = [line for out in outputs for line in out.splitlines() if line.startswith("stage generating")]
    assert len(generating) == 1, outputs
    assert is_complete(Path(paths.pop().split(" ", 1)[1]), config=SMALL)


@pytest.fixture()
def seeded_cache(monkeypatch, tmp_path):
    """A cache whose default-catalog directory already holds a (small) finished build."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = default_catalog_dir()
    build_default_catalog(path, seed=7, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    (path / COMPLETE_FILE).write_text(json.dumps(user_cache._marker(user_cache.DEFAULT_SEED, GeneratorConfig())))
    return path


def test_commands_without_data_open_the_cached_default(seeded_cache, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--policy", "oracle", "--split", "test", "--limit", "3", "--out", str(out),
                 "--no-progress", "--no-report"]) == 0
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["plan"]["task_split"]["path"] == str(seeded_cache / "task_splits.json")
    capsys.readouterr()
    assert main(["data", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["cleaned_product_count"] < 600
