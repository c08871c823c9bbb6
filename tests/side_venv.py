"""Separate virtual environments for integrations whose dependencies clash with each other or with the dev venv.

OpenEnv 0.10 needs ``mcp<2`` and verifiers 0.4 pins ``mcp==2.0.0``, so each is tested in its own venv, built
here from the registry on first use (``<repo>/.venv-openenv``, ``<repo>/.venv-verifiers``) with the project
installed editable, and reused while the requirements are unchanged (a stamp holds their hash). The suites run
in those venvs as a pytest subprocess; this process only reports their outcome.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAMP = ".shopsimrl-side-venv"


def _key(requirements: Sequence[str], files: Sequence[Path]) -> str:
    digest = hashlib.sha256("\n".join(requirements).encode())
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_venv(name: str, requirements: Sequence[str], *, files: Sequence[Path] = ()) -> Path:
    """The python of venv ``ROOT/name`` holding ``requirements`` (pip arguments), built or refreshed as needed."""
    venv = Path(os.environ.get("SHOPSIM_SIDE_VENVS", ROOT)) / name
    python = venv / "bin" / "python"
    key = _key(requirements, [ROOT / "pyproject.toml", *files])
    stamp = venv / STAMP
    if python.exists() and stamp.exists() and stamp.read_text() == key:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *requirements], check=True, cwd=ROOT)
    stamp.write_text(key)
    return python


def run_suite(python: Path, test_file: str, *, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run one test file under ``python``'s pytest (from the repository root, like CI)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(python), "-m", "pytest", test_file, "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-rs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )
