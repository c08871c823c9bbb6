"""Runs ``tests/test_verifiers.py`` in ``.venv-verifiers``: the project plus ``environments/shopsim_env`` (verifiers
0.4 from the registry) and ``uv``, which verifiers uses to run its chat harness program.

verifiers pins ``mcp==2.0.0`` while OpenEnv needs ``mcp<2``; this venv holds no torch and no OpenEnv.
"""

from __future__ import annotations

import pytest

from side_venv import ROOT, ensure_venv, run_suite

pytestmark = pytest.mark.slow
PACKAGE = ROOT / "environments" / "shopsim_env"


def test_verifiers_suite_passes_against_the_real_package():
    python = ensure_venv(".venv-verifiers", ["-e", ".", "-e", str(PACKAGE), "pytest>=8", "uv"],
                         files=[PACKAGE / "pyproject.toml"])
    done = run_suite(python, "tests/test_verifiers.py")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert " passed" in output and "skipped" not in output, output[-3000:]
