"""The CPU recipe's report: ``report.md`` (val table, SFT vs GRPO paired CI, wall times, memory) and ``curves.png``
(per optimizer step: SFT loss; GRPO reward, success, protocol-error rate, episode length, loss, clip fraction,
sampled tokens per second), written next to the checkpoints."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

CURVES = "curves.png"
REPORT = "report.md"
COMPARED = ("r_success", "r_strict")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)) and "step" in row:
            xs.append(float(row["step"]))
            ys.append(float(value))
    return xs, ys


def plot_curves(out: Path, target: Path) -> Path | None:
    """One small figure with a panel per curve (None when there is nothing to plot)."""
    sft = [r for r in _jsonl(out / "model" / "sft" / "log.jsonl") if "loss" in r]
    grpo = [r for r in _jsonl(out / "model" / "grpo" / "log.jsonl") if "shop/reward_mean" in r]
    if not sft and not grpo:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("SFT loss", sft, "loss"), ("GRPO mean r_strict", grpo, "shop/reward_mean"),
              ("GRPO success", grpo, "shop/success"), ("GRPO protocol-error rate", grpo, "shop/protocol_error_rate"),
              ("GRPO turns per episode", grpo, "shop/episode_turns"), ("GRPO loss", grpo, "loss"),
              ("GRPO clip fraction", grpo, "clip_ratio/region_mean"),
              ("GRPO sampled tokens/s", grpo, "shop/sampled_tokens_per_s")]
    fig, axes = plt.subplots(2, 4, figsize=(13, 5.5))
    for ax, (title, rows, key) in zip(axes.flat, panels, strict=True):
        phases = list(dict.fromkeys(str(r.get("phase", "")) for r in rows))  # in order of appearance
        for phase in phases:  # the SFT phases (every token, then assistant tokens) as separate lines
            xs, ys = _series([r for r in rows if str(r.get("phase", "")) == phase], key)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None, linewidth=1, label=phase or None)
        if len(phases) > 1:
            ax.legend(fontsize=7)
        if not _series(rows, key)[0]:
            ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes, fontsize=9)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(target, dpi=72)
    plt.close(fig)
    return target


def _pct(value: Any) -> str:
    return f"{100 * value:.2f}%" if isinstance(value, (int, float)) else "—"


def _num(value: Any, digits: int = 4) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "—"


def _phase_steps(sft: Mapping[str, Any]) -> str:
    """The steps of each SFT phase that ran, in training order (older results name none)."""
    parts = [f"{name} {sft[key]}" for name, key in (("short", "short_steps"), ("first", "first_steps"),
                                                     ("every-token", "lm_steps"), ("assistant", "assistant_steps"))
             if sft.get(key)]
    return f": {' + '.join(parts)}" if parts else ""


ROW_LABELS = {"init": "random init", "random": "`random` policy", "first": "`first` policy", "heuristic": "`heuristic` policy", "sft": "SFT",
              "grpo": "GRPO", "sft-auto": "SFT, `tool_choice` auto"}


def _validation(config: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    episodes = {row.get("episodes") for row in table.values()}
    lines = [f"## Validation ({config.get('eval_split')} split, {', '.join(str(e) for e in sorted(episodes))} "
             "episodes per row, the same tasks in every row)", "",
             "| row | tool choice | success | mean r_strict | protocol-error rate | steps | eval wall s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, row in table.items():
        choice = row.get("tool_choice") or ("— (built-in policy)" if row.get("policy") else "required")
        lines.append(f"| {ROW_LABELS.get(name, name)} | {choice} | {_pct(row.get('success'))} | "
                     f"{_num(row.get('r_strict'))} | {_pct(row.get('protocol_error_rate'))} | "
                     f"{_num(row.get('steps'), 2)} | {_num(row.get('wall_s'), 0)} |")
    lines += ["", "Under `tool_choice` required every turn is decoded as one call of the page's tools, so a protocol "
              "error cannot happen: those rows' 0% is by construction, not a result. The `tool_choice` auto row "
              "samples the SFT checkpoint freely; its protocol-error rate is what SFT taught of the call format.",
              ""]
    return lines


def _groups(grpo: Mapping[str, Any]) -> list[str]:
    groups = grpo.get("groups")
    if not isinstance(groups, Mapping):
        return []
    mode = "dynamic sampling (groups with reward spread only)" if grpo.get("dynamic") else "no dynamic sampling"
    if grpo.get("difficulty"):
        mode += f"; train tasks of difficulty tiers {grpo['difficulty']}"
    return [f"GRPO groups ({mode}): {groups.get('sampled')} sampled, {groups.get('kept')} with reward spread, "
            f"{groups.get('zero_spread')} zero-spread, {groups.get('unscored')} unscored; "
            f"{groups.get('trained')} trained on over {grpo.get('steps')} steps "
            f"({groups.get('informative_steps')} steps with at least one group with spread).", *_undynamic(grpo), ""]


def _undynamic(grpo: Mapping[str, Any]) -> list[str]:
    """What the same steps would have trained on without dynamic sampling (their own groups only)."""
    groups = grpo.get("groups") or {}
    if not grpo.get("dynamic") or "first_kept" not in groups:
        return []
    drawn = int(grpo.get("steps") or 0) * int(grpo.get("groups_per_step") or 0)
    of = f" of {drawn}" if drawn else ""
    return [f"Without dynamic sampling the updates would have held {groups['first_kept']}{of} groups with reward "
            f"spread (the steps' own groups), on {groups.get('first_informative_steps')} informative steps."]


def _stage_notes() -> dict[str, Callable[[Mapping[str, Any]], str]]:
    def demos(r: Mapping[str, Any]) -> str:
        by_source = r.get("episodes_by_source")
        if isinstance(by_source, Mapping):
            return (f"{r.get('episodes')} demonstration episodes ({', '.join(f'{k} {v}' for k, v in by_source.items())}), "
                    f"{r.get('turns')} turn records")
        return f"{r.get('episodes')} demonstration episodes (turn records: {r.get('turn_records')})"

    return {
        "init": lambda r: f"{r.get('parameters')} parameters",
        "demos": demos,
        "sft": lambda r: (f"{r.get('steps')} optimizer steps{_phase_steps(r)} ({r.get('examples_seen', '?')} rows "
                          f"from {r.get('episodes')} demonstration episodes)"),
        "grpo": lambda r: f"{r.get('steps')} optimizer steps, {r.get('episodes')} episodes",
        "eval": lambda r: f"{', '.join(ROW_LABELS.get(n, n) for n in r.get('checkpoints') or {})}",
    }


def _stages(results: Mapping[str, Any]) -> list[str]:
    notes = _stage_notes()
    lines = ["## Stages (each stage's last run)", "", "| stage | wall s | notes |", "|---|---:|---|"]
    timings = {k: v for k, v in (results.get("timings") or {}).items() if k in notes or k == "report"}
    for name, seconds in timings.items():
        stage = results.get(name)
        note = notes[name](stage) if name in notes and isinstance(stage, Mapping) else ""
        lines.append(f"| {name} | {seconds:.0f} | {note} |")
    lines.append(f"| total | {sum(timings.values()):.0f} | the stages' last runs |")
    invocations = results.get("invocations") or []
    if invocations:
        lines += ["", f"## Invocations ({len(invocations)}; total {sum(i.get('total_s', 0) for i in invocations):.0f} s)",
                  "", "| # | stages (wall s) | total s | arguments |", "|---:|---|---:|---|"]
        for number, inv in enumerate(invocations, 1):
            walls = ", ".join(f"{k} {v:.0f}" for k, v in (inv.get("wall_s") or {}).items())
            given = " ".join(f"{k}={v}" for k, v in (inv.get("arguments") or {}).items())
            lines.append(f"| {number} | {walls or ', '.join(inv.get('stages') or [])} | "
                         f"{inv.get('total_s', 0):.0f} | {given or '—'} |")
    return lines


def report_text(results: Mapping[str, Any], config: Mapping[str, Any], curves: str | None) -> str:
    lines = ["# CPU recipe: SFT → GRPO from scratch", ""]
    init = results.get("init") or {}
    if init:
        lines.append(f"Model: Qwen2 architecture, {init.get('parameters', 0) / 1e6:.2f} M parameters, "
                     f"byte-level BPE vocabulary {init.get('vocab')}, preset `{config.get('preset')}` (model "
                     f"`{config.get('model_preset', config.get('preset'))}`), seed {config.get('seed')}.")
        lines.append("")
    evaluation = results.get("eval") or {}
    if evaluation.get("checkpoints"):
        lines += _validation(config, evaluation["checkpoints"])
    compare = evaluation.get("compare") or {}
    if compare:
        lines += [f"## GRPO − SFT (paired bootstrap, {evaluation.get('paired_episodes')} paired episodes)", "",
                  "| metric | SFT | GRPO | difference | 95% CI |", "|---|---:|---:|---:|---:|"]
        for name in COMPARED:
            m = compare.get(name)
            if m:
                lines.append(f"| {name} | {_num(m['mean_a'])} | {_num(m['mean_b'])} | {m['diff']:+.4f} | "
                             f"[{m['ci_low']:+.4f}, {m['ci_high']:+.4f}] |")
        lines.append("")
    lines += _groups(results.get("grpo") or {})
    lines += _stages(results)
    lines += ["", f"Peak resident memory: {results.get('peak_rss_mb', '—')} MB.", ""]
    if curves:
        lines += [f"![training curves]({curves})", ""]
    settings = {k: v for k, v in config.items() if k != "invocations"}
    lines += ["## Configuration (the last invocation)", "", "```json", json.dumps(settings, indent=2), "```", ""]
    return "\n".join(lines)


def write_report(out: Path, results: Mapping[str, Any]) -> dict[str, Any]:
    config_path = out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    curves = plot_curves(out, out / CURVES)
    (out / REPORT).write_text(report_text(results, config, curves.name if curves else None), encoding="utf-8")
    return {"report": str(out / REPORT), "curves": str(curves) if curves else None}
