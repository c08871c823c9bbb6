"""Failure taxonomy: every cause and flag from its trace evidence, and the figures of real runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shopsimrl.catalog.prepare import PrepareOptions
from shopsimrl.cli import main
from shopsimrl.eval.taxonomy import CAUSES, FLAGS, behaviour_flags, failure_taxonomy, primary_cause
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
OK = {"r_type": 1.0, "r_att": 1.0, "r_option": 1.0, "r_price": 1.0, "price_verifiable": True}


def _page(asin: str, price: str, selected: float | None = None) -> dict:
    state = {"page_type": "product_detail", "product": {"asin": asin, "price": price}}
    if selected is not None:
        state["selected_price"] = selected
    return {"environment": {"observation_state": state}}


def _episode(reason: str = "purchase", status: str = "completed", pages: tuple = (), bought: str = "A",
             budget: float | None = 20.0, dialogue: dict | None = None, **detail: object) -> dict:
    full = {**OK, **detail, "termination_reason": reason}
    full["r_success"] = int(reason == "purchase" and all(full[k] == 1.0 for k in ("r_type", "r_att", "r_option",
                                                                                     "r_price")))
    final = {"termination_reason": reason, "reward_detail": full, "purchase": {"asin": bought},
             "goal": {"price_upper": budget}}
    if dialogue is not None:
        final["dialogue"] = dialogue
    return {"status": status, "final": final if status == "completed" else None, "steps": list(pages),
            **({"dialogue": {"turns": []}} if dialogue is not None else {})}


EVIDENCE = {
    "action_limit": _episode("action_limit"),
    "generation_length": _episode("generation_length"),
    "technical": _episode(status="failed"),
    "wrong_type": _episode(r_type=0.0, r_att=0.0),  # the first failing component decides
    "missing_attribute": _episode(r_att=0.5, r_option=0.0),
    "wrong_option": _episode(r_option=0.5),
    "over_budget": _episode(r_price=0.0),
    "price_unverifiable": _episode(r_price=0.0, price_verifiable=False),
}


@pytest.mark.parametrize("cause", [c for c in CAUSES if c != "other"])
def test_every_cause_is_read_from_its_evidence(cause):
    assert primary_cause(EVIDENCE[cause]) == cause


def test_a_success_has_no_cause_and_flags_need_their_evidence():
    assert primary_cause(_episode()) is None
    one_page = _episode(pages=(_page("A", "10 to 30"),))
    assert behaviour_flags(one_page) == ["first_page_bought", "price_above_budget_shown"]
    compared = _episode(pages=(_page("B", "5"), _page("A", "10 to 30", selected=12.0)))
    assert behaviour_flags(compared) == []  # another listing opened; the selected price is within budget
    no_budget = _episode(pages=(_page("B", "5"), _page("A", "10 to 300")), budget=None)
    assert behaviour_flags(no_budget) == []
    unasked = _episode(pages=(_page("B", "5"), _page("A", "9")), dialogue={"slots_revealed": 1, "slots_total": 3})
    assert behaviour_flags(unasked) == ["unasked_slot_bought"]
    assert behaviour_flags(_episode("action_limit", pages=(_page("A", "50"),))) == []  # no purchase, no flag
    rejected = _episode(pages=(_page("B", "5"), _page("A", "9")), dialogue={"slots_revealed": 3, "slots_total": 3})
    rejected["steps"].append({"dialogue": {"valid": True, "reply": "信息还不完整呢，你还没问我：规格"}})
    assert behaviour_flags(rejected) == ["bought_after_rejection"]


def test_the_taxonomy_counts_every_failure_once():
    records = [*EVIDENCE.values(), _episode(), _episode(pages=(_page("A", "99"),), r_price=0.0)]
    out = failure_taxonomy(records)
    assert out["episodes"] == 10 and out["failures"] == 9 and sum(out["causes"].values()) == 9
    assert out["causes"]["over_budget"] == 2 and sum(out["cause_shares"].values()) == pytest.approx(1.0)
    assert set(out["flags"]) == set(FLAGS) - {"unasked_slot_bought", "bought_after_rejection"}  # no dialogue
    assert out["flags"]["first_page_bought"] == {"purchases": 1, "failed": 1, "succeeded": 0,
                                                 "share_of_purchases": pytest.approx(1 / 7)}


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("taxonomy") / "data"
    build_default_catalog(out, seed=7, config=SMALL, options=PrepareOptions(test_size=20, val_size=20))
    return out


def test_runs_report_and_compare_their_failure_causes(small_data, tmp_path, capsys):
    runs = {}
    for policy in ("first", "heuristic"):
        runs[policy] = tmp_path / policy
        assert main(["eval", "--data", str(small_data), "--policy", policy, "--out", str(runs[policy]),
                     "--no-progress"]) in (0, 1)
    summary = json.loads((runs["first"] / "summary.json").read_text())
    taxonomy = summary["failure_taxonomy"]
    failed = summary["counts"]["requested"] - round(summary["primary"]["success_rate"] * summary["counts"]["scored"])
    assert taxonomy["failures"] == failed == sum(taxonomy["causes"].values()) > 0
    md = (runs["first"] / "report.md").read_text()
    assert "## Failure taxonomy" in md and (runs["first"] / "report_figures" / "failure_causes.png").is_file()
    capsys.readouterr()
    assert main(["compare", str(runs["first"]), str(runs["heuristic"]), "--resamples", "200", "--out",
                 str(tmp_path / "c.json")]) == 0
    assert "primary failure cause" in capsys.readouterr().out
    changes = json.loads((tmp_path / "c.json").read_text())["taxonomy"]
    assert sum(v["a"] for v in changes["causes"].values()) == sum(v["b"] for v in changes["causes"].values()) == 20
    assert changes["changed"] == sum(move["episodes"] for move in changes["moves"]) > 0
