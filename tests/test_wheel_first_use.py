"""After ``pip install`` of the wheel (outside the repository, in a fresh venv), ``shopsimrl eval --policy
heuristic --split test`` is a working first command: it builds the default catalog in the user cache itself; ``shopsimrl demo`` plays the
worked example on the fixture catalog shipped in the package.

Two such commands start at once, as two users' shells might: one builds, the other waits, and both finish.
Dependencies come from pip's own cache and wheel directories, so the venv takes seconds once pip has them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"  # a copy: building in the checkout would leave build/ behind
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(source)], check=True)
    (wheel,) = out.glob("shopsimrl-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The wheel installed in a fresh venv; returns the environment of a shell whose PATH starts there."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "SHOPSIMRL_CACHE_DIR", "XDG_CACHE_HOME")}
    # no PYTHONPATH: a checkout's src/ on it would make pip take the package as installed already
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], check=True, env=env)
    return env | {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def test_demo_works_from_a_wheel_outside_the_repository(installed, tmp_path):
    """Issue 45 item 1: the default --archive was a repo path (`archive not found: <cwd>/tests/data/...`)."""
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(["shopsimrl", "demo"], cwd=home, env=installed | {"HOME": str(home)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "reward (r_strict) = 1.0" in done.stdout and "target_asin_match=True" in done.stdout
    assert (home / "data" / "fixture" / "manifest.json").is_file()


def test_eval_is_a_working_first_command_after_a_wheel_install(installed, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = installed | {"HOME": str(home)}
    start = time.monotonic()
    runs = [subprocess.Popen(["shopsimrl", "eval", "--policy", "heuristic", "--split", "test", "--out", f"runs/{n}"],
                             cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for n in ("first", "second")]
    outputs = [run.communicate(timeout=1200)[0] for run in runs]
    elapsed = time.monotonic() - start
    assert [run.returncode for run in runs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    built = [o for o in outputs if "[shopsimrl] first use: building the default catalog" in o]
    assert len(built) >= 1 and sum("generating" in o for o in outputs) == 1, outputs
    cache = home / ".cache" / "shopsimrl" / "catalogs"
    (catalog,) = [path for path in cache.iterdir() if path.is_dir()]
    summaries = [json.loads((home / "runs" / n / "summary.json").read_text("utf-8")) for n in ("first", "second")]
    assert summaries[0]["counts"]["completed"] == summaries[0]["counts"]["requested"] > 0
    assert summaries[0]["primary"] == summaries[1]["primary"]  # the waiting process opened the same catalog
    print(f"first command (two at once) after a wheel install: {elapsed:.1f} s; catalog {catalog}")
