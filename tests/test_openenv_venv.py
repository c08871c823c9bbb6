"""Runs the OpenEnv suites (:data:`SUITES`) in ``.venv-openenv``: the project with its ``openenv`` extra (and
hypothesis, for the edge suites' properties), from the registry.

OpenEnv needs ``mcp<2`` while verifiers pins ``mcp==2.0.0``, so neither shares the dev venv; this test builds
the venv on first use (reused while ``pyproject.toml`` is unchanged) and fails with the suite's own output.
"""

from __future__ import annotations

import pytest

from side_venv import ensure_venv, run_suite

pytestmark = pytest.mark.slow
REQUIREMENTS = ["-e", ".[openenv]", "pytest>=8", "hypothesis>=6.100"]  # hypothesis: the edge suite's properties


SUITES = {
    "tests/test_openenv.py": "WebSocket episodes, sessions, discovery, no goal leak",
    "tests/test_openenv_edge.py": "the shared server edge in front of OpenEnv's own WebSocket handler",
    "tests/test_openenv_validation.py": "openenv validate (static and --url) and each check's property",
    "tests/test_edge_fuzz.py": "the same malformed bodies at all three servers, serve-openenv included",
}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_openenv_suite_passes_against_the_real_package(suite):
    python = ensure_venv(".venv-openenv", REQUIREMENTS)
    done = run_suite(python, suite)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert " passed" in output and "skipped" not in output, output[-3000:]
