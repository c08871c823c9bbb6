"""ShopSimulator's four scenarios in one evaluation: single-turn / multi-turn × standard / persona.

Each scenario is an ordinary run directory under ``OUT/<scenario>`` (resumable, reportable, comparable), all
over the same task ids and seeds. Standard mode shows the full instruction; persona mode shows the short
persona request plus the user profile; multi-turn withholds the instruction and lets the agent ask a shopper
(``ask_user``) who knows it. A built-in single-turn policy plays its dialogue counterpart in the multi-turn
scenarios (:data:`DIALOGUE_POLICY`). The table gives, per scenario, the strict score (mean ``r_strict`` × 100)
and the success rate, each with a 95% interval (normal approximation over tasks, a task's repeats averaged
first), plus the repeat figures of :mod:`.repeats` when ``repeats`` > 1. docs/scenarios.md maps them onto
ShopSimulator's.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.episode import turn_limit
from ..contract import MULTI_TURN, SINGLE_TURN
from ..errors import ConfigError
from .rundir import RunDir, is_completed
from .summary import reward_detail

SCENARIO_SCHEMA = "shopsimrl-scenarios-v1"
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Scenario:
    name: str  # the run directory's name
    title: str
    multi_turn: bool
    persona: bool


SCENARIOS = (
    Scenario("single-standard", "single-turn standard", False, False),
    Scenario("single-persona", "single-turn persona", False, True),
    Scenario("multi-standard", "multi-turn standard", True, False),
    Scenario("multi-persona", "multi-turn persona", True, True),
)
DIALOGUE_POLICY = {"heuristic": "dialogue-heuristic", "oracle": "dialogue-oracle", "strong": "dialogue-strong"}


def parse_scenarios(text: str) -> list[Scenario]:
    """``all`` or a comma-separated list of scenario names, in ShopSimulator's order."""
    if text.strip() == "all":
        return list(SCENARIOS)
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = {s.name: s for s in SCENARIOS}
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ConfigError(f"unknown scenario {', '.join(unknown) or text!r}; choose 'all' or some of "
                            + ", ".join(known), code="scenario")
    return [s for s in SCENARIOS if s.name in names]


def scenario_policy(policy: str, scenario: Scenario) -> str:
    """The built-in policy that plays ``scenario``: the dialogue counterpart in multi-turn scenarios."""
    return DIALOGUE_POLICY.get(policy, policy) if scenario.multi_turn else policy


def scenario_settings(base: Any, scenario: Scenario, *, max_steps: int | None = None) -> Any:
    """``base`` (an ``EvalSettings``) for one scenario: its run directory, mode, shopper, policy, turn limit."""
    shopper = (base.shopper or "rule") if scenario.multi_turn else None
    return dataclasses.replace(
        base, out=str(Path(base.out) / scenario.name), persona=scenario.persona, shopper=shopper,
        shopper_llm=base.shopper_llm if scenario.multi_turn else None,
        policy=scenario_policy(base.policy, scenario) if base.policy else None,
        max_steps=turn_limit(MULTI_TURN if scenario.multi_turn else SINGLE_TURN, max_steps),
        experiment=f"{base.experiment or Path(base.out).name}-{scenario.name}",
    )


def _interval(values: Sequence[float]) -> dict[str, float | None]:
    n = len(values)
    mean = sum(values) / n if n else None
    if n < 2 or mean is None:
        return {"mean": mean, "ci_low": None, "ci_high": None}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half}


def scenario_row(run: str | Path, scenario: Scenario) -> dict[str, Any]:
    """One scenario's figures from its run directory (completed episodes of its plan)."""
    from .runner import run_summary

    run_dir = RunDir(run)
    plan = run_dir.plan()
    records = run_dir.records()
    ids = {job.episode_id for job in plan.jobs()}
    done = [r for eid, r in sorted(records.items()) if eid in ids and is_completed(r)]
    strict: dict[int, list[float]] = defaultdict(list)
    success: dict[int, list[float]] = defaultdict(list)
    for record in done:
        detail = reward_detail(record)
        task = int(record["job"]["task_id"])
        strict[task].append(100.0 * float(detail.get("r_strict") or 0.0))
        success[task].append(100.0 * (1.0 if detail.get("r_success") == 1 else 0.0))
    summary = run_summary(plan, run_dir, records)
    return {
        "scenario": scenario.name, "title": scenario.title, "run": str(run),
        "policy": plan.plan["model"].get("policy") or plan.plan["model_id"],
        "tasks": len(strict), "episodes": len(done), "requested": len(ids),
        "max_steps": plan.plan["runtime"].get("max_steps"),
        "strict_score": _interval([sum(v) / len(v) for v in strict.values()]),
        "success_rate": _interval([sum(v) / len(v) for v in success.values()]),
        "steps_mean": summary["behavior"]["steps_mean"],
        "repeats": summary.get("repeats"),
    }


def scenario_table(out: str | Path, scenarios: Sequence[Scenario], *, label: str) -> dict[str, Any]:
    rows = [scenario_row(Path(out) / s.name, s) for s in scenarios]
    return {"schema_version": SCENARIO_SCHEMA, "label": label, "rows": rows}


def _cell(figure: Mapping[str, Any]) -> str:
    if figure["mean"] is None:
        return "—"
    if figure["ci_low"] is None:
        return f"{figure['mean']:.2f}"
    return f"{figure['mean']:.2f} [{figure['ci_low']:.1f}, {figure['ci_high']:.1f}]"


def table_rows(table: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(metric, one cell per scenario) in display order: the shared content of every rendering."""
    rows = table["rows"]
    out = [
        ("strict score (95% CI)", [_cell(r["strict_score"]) for r in rows]),
        ("success rate % (95% CI)", [_cell(r["success_rate"]) for r in rows]),
        ("episodes (tasks)", [f"{r['episodes']} ({r['tasks']})" for r in rows]),
        ("turn limit", [str(r["max_steps"]) for r in rows]),
        ("policy", [str(r["policy"]) for r in rows]),
        ("steps per episode", ["—" if r["steps_mean"] is None else f"{r['steps_mean']:.2f}" for r in rows]),
    ]
    repeated = [r["repeats"] for r in rows]
    if any(repeated):
        def fmt(rep: Mapping[str, Any] | None, key: str) -> str:
            if not rep:
                return "—"
            std = rep[f"{key}_std"]
            return f"{100 * rep[f'{key}_mean']:.2f} ± {100 * (std or 0.0):.2f}"

        k = max(rep["repeats"] for rep in repeated if rep)
        out += [
            ("repeats", [str(rep["repeats"]) if rep else "1" for rep in repeated]),
            ("success % mean ± std (repeats)", [fmt(rep, "success_rate") for rep in repeated]),
            ("strict score mean ± std (repeats)", [fmt(rep, "reward_mean") for rep in repeated]),
            (f"pass^{k} %", [f"{100 * rep['pass_hat_k'][str(rep['repeats'])]:.2f}" if rep else "—"
                             for rep in repeated]),
            (f"pass@{k} %", [f"{100 * rep['pass_at_k'][str(rep['repeats'])]:.2f}" if rep else "—"
                             for rep in repeated]),
            ("flip rate %", [f"{100 * rep['flip_rate']:.2f}" if rep else "—" for rep in repeated]),
            ("repeats byte-identical", ["yes" if rep and rep["identical"] else ("no" if rep else "—")
                                        for rep in repeated]),
        ]
    return out


def scenarios_markdown(table: Mapping[str, Any]) -> str:
    titles = [r["title"] for r in table["rows"]]
    lines = [f"# Four scenarios: {table['label']}", "",
             "Strict score = mean r_strict × 100; success rate = share of episodes with r_success = 1; "
             "95% intervals over tasks (normal approximation, a task's repeats averaged first). "
             "Scenario mapping: docs/scenarios.md.", "",
             "| metric | " + " | ".join(titles) + " |", "|---|" + "---|" * len(titles)]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in table_rows(table)]
    notes = _notes(table)
    if notes:
        lines += ["", *[f"> note: {note}" for note in notes]]
    lines += ["", "Run directories: " + ", ".join(f"`{r['run']}`" for r in table["rows"])]
    return "\n".join(lines) + "\n"


def _notes(table: Mapping[str, Any]) -> list[str]:
    notes = []
    if any(r["policy"] in ("oracle", "dialogue-oracle") for r in table["rows"]):
        notes.append("the oracle reads the private goal: a solvability check, not a baseline")
    if any(r["repeats"] and r["repeats"]["identical"] for r in table["rows"]):
        notes.append("the repeats are byte-identical episodes (a built-in policy and the rule shopper ignore "
                     "the sampling seed): their spread is zero by construction, not a measured noise floor")
    if any(r["episodes"] < r["requested"] for r in table["rows"]):
        notes.append("some episodes are not completed (technical failures): the figures cover completed ones")
    return notes


def scenarios_terminal(table: Mapping[str, Any]) -> Any:
    from rich.table import Table

    out = Table(title=f"four scenarios: {table['label']}", header_style="bold")
    out.add_column("metric")
    for row in table["rows"]:
        out.add_column(row["title"], justify="right")
    for name, cells in table_rows(table):
        out.add_row(name, *cells)
    return out


def write_scenarios(out: str | Path, table: Mapping[str, Any]) -> dict[str, str]:
    """``scenarios.json``, ``scenarios.md`` and ``scenarios.html`` in ``out``; returns their paths."""
    from .report import html_page
    from .rundir import write_json_atomic

    root = Path(out)
    write_json_atomic(root / "scenarios.json", dict(table))
    markdown = scenarios_markdown(table)
    (root / "scenarios.md").write_text(markdown, "utf-8")
    (root / "scenarios.html").write_text(html_page(markdown), "utf-8")
    return {"json": str(root / "scenarios.json"), "md": str(root / "scenarios.md"),
            "html": str(root / "scenarios.html")}
