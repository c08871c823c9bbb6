"""`make run` sets up only the core install; `make test` adds extras, torch and the browser (issue 13 item 12).

Checked with ``make -n`` (print the commands, run nothing) against a throw-away venv path.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(target: str, venv: Path) -> str:
    done = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"], capture_output=True, text=True,
                          check=True)
    return done.stdout


def test_run_installs_only_the_core_package(tmp_path):
    commands = _dry_run("run", tmp_path / "venv")
    assert "-m venv" in commands and "pip install --quiet -e ." in commands
    for heavy in ("torch", "-e '.[", "ensure_chromium", "playwright"):
        assert heavy not in commands, heavy
    assert "shopsimrl data build-default" in commands and "shopsimrl eval" in commands


def test_test_on_a_fresh_clone_installs_everything_torch_first(tmp_path):
    commands = _dry_run("test", tmp_path / "venv")
    order = [commands.index(part) for part in (
        "-m venv", "pip install --quiet -e .\n", "'torch==2.13.0'", "-e '.[dev,train,ray]'", "ensure_chromium.sh",
        "ruff check", "bin/pytest",
    )]
    assert order == sorted(order)


def test_test_after_run_installs_only_the_difference(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".shopsimrl-core").touch()  # what `make run` leaves (newer than pyproject.toml)
    (tmp_path / "venv-verl").mkdir()
    (tmp_path / "venv-verl" / ".shopsimrl-verl").touch()  # the verl test venv (Makefile VERL_VENV), already built
    commands = _dry_run("test", venv)
    assert "-m venv" not in commands and "'torch==2.13.0'" in commands and "ensure_chromium.sh" in commands
    (venv / ".shopsimrl-dev").touch()
    commands = _dry_run("test", venv)
    assert "pip install" not in commands and "ruff check" in commands
    assert "pip install" not in _dry_run("run", venv)


def test_verl_tests_run_in_their_own_venv_torch_first(tmp_path):
    """verl pins transformers<5.11: its venv is separate, gets the pinned torch first, and runs the verl tests."""
    commands = _dry_run("test", tmp_path / "venv")
    verl_venv = f"{tmp_path / 'venv'}-verl"
    order = [commands.index(part) for part in (
        f"-m venv {verl_venv}", f"{verl_venv}/bin/pip install --quiet 'torch==2.13.0'",
        f"{verl_venv}/bin/pip install --quiet -e '.[verl]' pytest", "ruff check",
        f"{verl_venv}/bin/pytest tests/test_train_verl.py",
    )]
    assert order == sorted(order)
