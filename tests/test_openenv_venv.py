"""Runs the suites that need the real ``openenv`` package (``tests/test_openenv.py``, ``test_openenv_edge.py``,
``test_edge_fuzz.py``) in ``.venv-openenv``: the project with its ``openenv`` extra (and hypothesis), from the registry.

OpenEnv needs ``mcp<2`` while verifiers pins ``mcp==2.0.0``, so neither shares the dev venv; this test builds
the venv on first use (reused while ``pyproject.toml`` is unchanged) and fails with the suite's own output.
"""

from __future__ import annotations

import pytest

from side_venv import ensure_venv, run_suite

pytestmark = pytest.mark.slow
REQUIREMENTS = ["-e", ".[openenv]", "pytest>=8", "hypothesis>=6.100"]  # hypothesis: the edge suite's properties


def _passes_in_the_side_venv(test_file: str) -> None:
    python = ensure_venv(".venv-openenv", REQUIREMENTS)
    done = run_suite(python, test_file)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert " passed" in output and "skipped" not in output, output[-3000:]


def test_openenv_suite_passes_against_the_real_package():
    _passes_in_the_side_venv("tests/test_openenv.py")


def test_openenv_edge_suite_passes_against_the_real_package():
    """``tests/test_openenv_edge.py``: the shared server edge in front of OpenEnv's own WebSocket handler."""
    _passes_in_the_side_venv("tests/test_openenv_edge.py")


def test_edge_fuzz_suite_covers_all_three_servers_with_the_real_package():
    """``tests/test_edge_fuzz.py`` with ``serve-openenv`` among its servers (skipped in the dev venv)."""
    _passes_in_the_side_venv("tests/test_edge_fuzz.py")
