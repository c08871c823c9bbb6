"""The verifiers package's committed example run (``environments/shopsim_env/outputs``) and its defaults.

The run is ``scripts/vf_example_outputs.py``'s: ``vf-eval`` of the built-in heuristic through the policy server,
5 test tasks x 3 rollouts. It is checked for structure and consistency, not for fixed figures: every rollout
parsed, scored and error-free, the stamps those of the current code (a generator change fails this until the
run is regenerated), the README's quoted figures those of the file, and the package's two sets of defaults
(``configs/eval.toml`` for verifiers 0.4's CLI, ``[tool.verifiers.eval]`` for the hub) equal.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from shopsimrl.generate import GENERATOR_VERSION
from shopsimrl.versions import ENVIRONMENT_VERSION

tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ (the verifiers package itself needs 3.11)")
PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "shopsim_env"
RUN = PACKAGE / "outputs" / "heuristic"
STAMPS = ("environment_version", "generator_version", "catalog_sha256", "task_set_sha256")


def _rollouts() -> list[dict]:
    return [json.loads(line) for line in (RUN / "traces.jsonl").read_text("utf-8").splitlines() if line.strip()]


def test_the_defaults_agree_and_bound_concurrency_for_a_small_machine():
    pyproject = tomllib.loads((PACKAGE / "pyproject.toml").read_text("utf-8"))["tool"]["verifiers"]["eval"]
    config = tomllib.loads((PACKAGE / "configs" / "eval.toml").read_text("utf-8"))
    assert pyproject == {"num_examples": config["select"]["limit"], "rollouts_per_example": config["num_rollouts"],
                         "max_concurrent": config["max_concurrent"]}
    assert pyproject["num_examples"] >= 5 and pyproject["rollouts_per_example"] >= 3
    assert config["max_concurrent"] <= 8 and config["push"] is False  # verifiers' default -c 128 fails on 2 cores


def test_the_committed_run_has_every_rollout_scored_and_stamped():
    rollouts = _rollouts()
    config = tomllib.loads((PACKAGE / "configs" / "eval.toml").read_text("utf-8"))
    per_task = Counter(r["traces"][0]["task"]["data"]["task_id"] for r in rollouts)
    assert len(per_task) == config["select"]["limit"] and set(per_task.values()) == {config["num_rollouts"]}
    stamps = set()
    for rollout in rollouts:
        assert rollout["ok"] and not rollout["errors"], rollout["errors"]
        (trace,) = rollout["traces"]
        assert trace["stop_condition"] == "episode_over" and not trace["errors"]
        score = trace["rewards"]["r_strict"]["score"]
        assert 0.0 <= score <= 1.0
        data = trace["task"]["data"]
        stamps.add(tuple(data[key] for key in STAMPS))
    assert len(stamps) == 1, stamps  # one catalog, one task set
    (stamp,) = stamps
    assert stamp[:2] == (ENVIRONMENT_VERSION, GENERATOR_VERSION), "regenerate: scripts/vf_example_outputs.py"
    assert all(re.fullmatch(r"[0-9a-f]{64}", value) for value in stamp[2:])
    resolved = json.loads((RUN / "configs" / "resolved" / "eval.json").read_text("utf-8"))
    assert resolved["max_concurrent"] == config["max_concurrent"] and resolved["push"] is False


def test_the_readme_quotes_the_committed_figures():
    rollouts = _rollouts()
    scores = [r["traces"][0]["rewards"]["r_strict"]["score"] for r in rollouts]
    readme = (PACKAGE / "README.md").read_text("utf-8")
    for section in ("### Overview", "### Datasets", "### Task", "### Quickstart", "### Environment Arguments",
                    "### Metrics"):
        assert section in readme
    quoted = re.search(r"mean r_strict (\d\.\d{4}), (\d+) of (\d+) rollouts succeed", readme)
    assert quoted, "the README quotes the example run's mean and successes"
    assert float(quoted[1]) == round(sum(scores) / len(scores), 4)
    assert (int(quoted[2]), int(quoted[3])) == (sum(s == 1.0 for s in scores), len(scores))
    assert any(s > 0 for s in scores)
    metrics = set(rollouts[0]["traces"][0]["metrics"])
    assert all(f"`{name}`" in readme for name in metrics), metrics


def test_the_committed_run_holds_plain_files_only():
    assert not [p for p in RUN.rglob("*") if p.is_symlink()]  # OpenEnv's validator refuses trees with links
