"""``eval --repeats K``: pass^k, pass@k, flip rate, spread over repeats, and byte-identical repeats."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.cli import main
from shopsimrl.eval.repeats import pass_at_k, pass_hat_k, repeat_summary
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)


@given(st.lists(st.booleans(), min_size=1, max_size=7), st.data())
def test_pass_k_estimators_match_enumerating_every_draw(outcomes, data):
    n, c = len(outcomes), sum(outcomes)
    k = data.draw(st.integers(1, n))
    draws = list(itertools.combinations(outcomes, k))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(d) for d in draws) / len(draws))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
    assert pass_hat_k(n, c, 1) == pytest.approx(pass_at_k(n, c, 1)) == pytest.approx(c / n)


def _record(task: int, sample: int, success: bool, action: str = "a") -> dict:
    return {"job": {"task_id": task, "sample_id": sample, "seed": 1000 * task + sample, "split": "test"},
            "episode_id": f"{task}-{sample}", "duration_ms": float(sample), "reset": {"idx": task},
            "conversation": [{"role": "assistant", "content": action}],
            "final": {"reward_detail": {"r_success": int(success), "r_strict": 1.0 if success else 0.25}}}


def test_repeat_summary_counts_flips_and_tells_identical_repeats_apart():
    # task 1 always succeeds, task 2 never, task 3 flips (2 of 3), task 4 has one repeat only (left out)
    records = [_record(1, s, True) for s in range(3)] + [_record(2, s, False) for s in range(3)]
    records += [_record(3, 0, True, "x"), _record(3, 1, False, "y"), _record(3, 2, True, "x"), _record(4, 0, True)]
    out = repeat_summary(records)
    assert out is not None
    assert out["repeats"] == 3 and out["tasks"] == 3 and out["tasks_left_out"] == 1
    assert out["flip_rate"] == pytest.approx(1 / 3)
    assert out["per_repeat"]["success_rate"] == pytest.approx([2 / 3, 1 / 3, 2 / 3])
    assert out["pass_hat_k"]["3"] == pytest.approx(1 / 3) and out["pass_at_k"]["3"] == pytest.approx(2 / 3)
    assert out["pass_hat_k"]["2"] == pytest.approx((1 + 0 + 1 / 3) / 3)
    assert out["success_rate_std"] > 0 and out["identical"] is False
    same = [_record(t, s, t == 1) for t in (1, 2) for s in range(2)]  # seeds and timings differ, episodes do not
    assert repeat_summary(same)["identical"] is True
    assert repeat_summary([_record(1, 0, True)]) is None


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repeats") / "data"
    build_default_catalog(out, seed=7, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    return out


@pytest.mark.parametrize("shopper", [None, "rule"])
def test_builtin_policy_repeats_are_byte_identical_and_the_report_says_so(small_data, tmp_path, capsys, shopper):
    out = tmp_path / "rep"
    extra = ["--shopper", "rule", "--policy", "dialogue-heuristic"] if shopper else ["--policy", "heuristic"]
    assert main(["eval", "--data", str(small_data), *extra, "--limit", "6", "--repeats", "3", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "pass^3 / pass@3" in printed and "repeats byte-identical" in printed
    plan = json.loads((out / "manifest.json").read_text())["plan"]
    seeds = {(job["task_id"], job["seed"]) for job in plan["jobs"]}
    assert len(seeds) == 18  # distinct sampling seeds per repeat
    repeats = json.loads((out / "summary.json").read_text())["repeats"]
    assert repeats["identical"] is True and repeats["flip_rate"] == 0 and repeats["success_rate_std"] == 0
    assert repeats["noise_source"] == "none"
    assert repeats["pass_hat_k"]["3"] == repeats["pass_at_k"]["3"] == repeats["success_rate_mean"]
    report = (out / "report.md").read_text()
    assert "byte-identical" in report
    per_seed = ", ".join(f"{v:.4f}" for v in repeats["per_repeat"]["reward_mean"])
    assert f"| r_strict per seed (repeat 0, 1, …) | {per_seed} |" in report  # the per-seed means and their spread
    assert "| spread of the per-seed r_strict (max − min) | 0.0000 |" in report and "r_strict per seed" in printed


def test_the_noise_source_separates_the_llm_shoppers_noise():
    from shopsimrl.eval.repeats import noise_source

    assert noise_source(True, None) == noise_source(True, "rule") == "none"
    assert noise_source(True, "llm") == "shopper"  # same agent, different shopper seeds
    assert noise_source(False, "rule") == "agent" and noise_source(False, "llm") == "agent+shopper"
