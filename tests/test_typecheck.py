"""mypy, strict, over the whole package (pyproject.toml ``[tool.mypy] files``).

Runs in ``make test`` through pytest; mypy comes with the ``dev`` extra (``mypy`` alone in the repository root runs
the same check).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mypy(*args: str) -> tuple[str, str, int]:
    try:
        from mypy import api
    except ImportError:  # pragma: no cover - the dev extra installs it
        pytest.fail("mypy is not installed: `pip install -e '.[dev]'` (make test does it)")
    return api.run(["--config-file", str(ROOT / "pyproject.toml"), "--python-executable", sys.executable,
                    "--cache-dir", str(ROOT / ".mypy_cache"), *args])


def test_typed_modules_pass_strict_mypy(monkeypatch):
    monkeypatch.chdir(ROOT)
    stdout, stderr, status = _mypy()
    assert status == 0, stdout + stderr
    checked = re.search(r"no issues found in (\d+) source files", stdout)
    assert checked is not None and int(checked.group(1)) >= 150, stdout  # every module of the package


PROBE = """
from shopsimrl.env.interface import ResetResult, ShopEnvironment, StepResult, TerminateResult


class Good:
    def reset(self, task_id: int, persona: bool | None = None, interaction_mode: str = "single_turn", *,
              include_private_goal: bool = False) -> ResetResult:
        raise NotImplementedError

    def step(self, action: str) -> StepResult:
        raise NotImplementedError

    def terminate(self, reason: str = "action_limit") -> TerminateResult:
        raise NotImplementedError

    def tools(self) -> list[dict[str, object]]:
        return []

    def observation_state(self) -> dict[str, object]:
        return {}

    @property
    def done(self) -> bool:
        return False

    def close(self) -> None:
        pass


class Wrong(Good):
    def step(self, action: int) -> StepResult:  # type: ignore[override]
        raise NotImplementedError


def good(env: Good) -> ShopEnvironment:
    return env


def wrong(env: Wrong) -> ShopEnvironment:
    return env
"""


def test_mypy_catches_a_protocol_mismatch(tmp_path, monkeypatch):
    """The static check can fail: a class conforming in all but ``step``'s parameter type is rejected."""
    monkeypatch.chdir(ROOT)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, "utf-8")
    stdout, _, status = _mypy(str(probe))
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert status == 1 and len(errors) == 1, stdout
    assert 'Incompatible return value type (got "Wrong", expected "ShopEnvironment")' in errors[0], stdout
    assert "def step(self, action: int) -> StepResult" in stdout, stdout
