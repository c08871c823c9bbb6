"""``report.md`` and ``report.html`` for a run (optionally against a second run), with matplotlib figures.

Figures: mean reward components, termination reasons, steps per episode, success by top-level category (the
goal category is in ``final.goal``), protocol-error / invalid-action / policy-failure rates, and for two runs the
paired differences with their bootstrap intervals. Everything is computed from the run directory alone; the
HTML embeds its figures, so it is one self-contained file. Category names are drawn only when a CJK font is
installed; otherwise the figure uses numbered labels and the table beside it gives the names.
"""

from __future__ import annotations

import base64
import html
import io
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..contract import MISSING_TEXT
from .report_stats import clustered_cell, intervals_markdown, repeats_markdown, stamps_markdown
from .rundir import RunDir, is_completed, write_json_atomic
from .runner import run_summary
from .summary import reward_detail, step_counts
from .taxonomy import CAUSE_TITLES, FLAG_TITLES

FIGURE_DIR = "report_figures"
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "SimHei",
             "Source Han Sans SC", "Droid Sans Fallback", "AR PL UMing CN")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


CJK_FONT_FILES = (  # Debian's fonts-wqy-microhei (installed by `make test`), fonts-wqy-zenhei, fonts-noto-cjk
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
)


def _cjk_font() -> str | None:
    """A CJK font matplotlib can draw category names with; a Debian font file installed after matplotlib built
    its font cache is added by path (the cache alone would miss it and the chart would fall back to #1…#N)."""
    from matplotlib import font_manager

    names = {font.name for font in font_manager.fontManager.ttflist}
    found = next((name for name in CJK_FONTS if name in names), None)
    if found is None:
        for path in CJK_FONT_FILES:
            if Path(path).is_file():
                font_manager.fontManager.addfont(path)
                return str(font_manager.FontProperties(fname=path).get_name())
    return found


def _category(record: Mapping[str, Any]) -> str:
    goal = (record.get("final") or {}).get("goal") or {}
    category = str(goal.get("category") or MISSING_TEXT)
    return category.split("›")[0].strip() or MISSING_TEXT


def run_tables(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-run aggregates behind the figures."""
    by_category: dict[str, list[float]] = defaultdict(list)
    steps = []
    for record in records:
        by_category[_category(record)].append(float(reward_detail(record).get("r_success") or 0.0))
        steps.append(step_counts(record)["steps"])
    categories = sorted(by_category.items(), key=lambda item: (-len(item[1]), item[0]))
    return {
        "categories": [(name, len(values), sum(values) / len(values)) for name, values in categories],
        "steps": steps,
    }


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def _figures(summary: Mapping[str, Any], tables: Mapping[str, Any], comparison: Mapping[str, Any] | None) -> dict[str, bytes]:
    plt = _pyplot()
    font = _cjk_font()
    if font:
        plt.rcParams["font.sans-serif"] = [font, "DejaVu Sans"]
    figures: dict[str, bytes] = {}

    comps = summary["reward_components"]
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.bar(list(comps), [v or 0.0 for v in comps.values()], color="#4c72b0")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean")
    ax.set_title("Reward components")
    for i, v in enumerate(comps.values()):
        ax.text(i, (v or 0) + 0.02, f"{(v or 0):.3f}", ha="center", fontsize=8)
    figures["components.png"] = _png(fig)
    plt.close(fig)

    reasons = summary["behavior"]["termination_reasons"]
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    ax.barh(list(reasons) or ["none"], list(reasons.values()) or [0], color="#55a868")
    ax.set_xlabel("episodes")
    ax.set_title("Termination reasons")
    figures["terminations.png"] = _png(fig)
    plt.close(fig)

    steps = tables["steps"] or [0]
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    ax.hist(steps, bins=range(0, max(steps) + 2), color="#8172b2", align="left", rwidth=0.85)
    ax.set_xlabel("model steps per episode")
    ax.set_ylabel("episodes")
    ax.set_title("Steps per episode")
    figures["steps.png"] = _png(fig)
    plt.close(fig)

    cats = tables["categories"]
    fig, ax = plt.subplots(figsize=(6.4, max(2.4, 0.32 * len(cats) + 0.8)))
    labels = [name if font else f"#{i + 1}" for i, (name, _, _) in enumerate(cats)]
    ax.barh(labels[::-1], [rate for _, _, rate in cats][::-1], color="#c44e52")
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("success rate")
    ax.set_title("Success by category" + ("" if font else " (names in the table)"))
    figures["categories.png"] = _png(fig)
    plt.close(fig)

    b = summary["behavior"]
    rates = {"protocol errors\n(per model step)": b["protocol_error_rate"] or 0.0,
             "invalid actions\n(per env action)": b["invalid_action_rate"] or 0.0,
             "policy failures\n(per model step)": b["policy_failure_rate"] or 0.0}
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    ax.bar(list(rates), [100 * v for v in rates.values()], color="#dd8452")
    ax.set_ylabel("%")
    ax.set_title("Error rates")
    figures["error_rates.png"] = _png(fig)
    plt.close(fig)

    taxonomy = summary.get("failure_taxonomy") or {}
    causes = taxonomy.get("causes") or {}
    if causes:
        fig, ax = plt.subplots(figsize=(6.4, max(2.2, 0.34 * len(causes) + 0.9)))
        names = [CAUSE_TITLES[c] for c in causes][::-1]
        ax.barh(names, list(causes.values())[::-1], color="#937860")
        ax.set_xlabel("failed episodes")
        ax.set_title("Failure causes (primary)")
        figures["failure_causes.png"] = _png(fig)
        plt.close(fig)

    if comparison is not None:
        figures["paired_differences.png"] = _paired_differences(plt, comparison)
    return figures


def _paired_differences(plt: Any, comparison: Mapping[str, Any]) -> bytes:
    """The comparison figure: each reward component's and the steps' paired difference with its 95% CI."""
    metrics = comparison["metrics"]
    names = [n for n in metrics if n.startswith("r_")] + ["steps"]
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4), gridspec_kw={"width_ratios": [3, 1]})
    for ax, chosen in ((axes[0], [n for n in names if n != "steps"]), (axes[1], ["steps"])):
        diffs = [metrics[n]["diff"] for n in chosen]
        lows = [metrics[n]["diff"] - metrics[n]["ci_low"] for n in chosen]
        highs = [metrics[n]["ci_high"] - metrics[n]["diff"] for n in chosen]
        ax.errorbar(range(len(chosen)), diffs, yerr=[lows, highs], fmt="o", capsize=4, color="#4c72b0")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(chosen)), chosen, rotation=30)
    axes[0].set_title("Paired differences (B − A), 95% CI")
    figure = _png(fig)
    plt.close(fig)
    return figure


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.2f}%" if pct else f"{value:.4f}"


def _markdown(title: str, summary: Mapping[str, Any], tables: Mapping[str, Any], comparison: Mapping[str, Any] | None,
              figure_paths: Mapping[str, str], run: Mapping[str, Any]) -> str:
    c, p, b, cost = summary["counts"], summary["primary"], summary["behavior"], summary["cost"]
    lines = [f"# {title}", ""]
    model = run.get("model", {})
    if model.get("policy") == "oracle":
        lines += ["> **Solvability check.** The oracle reads the private goal; its figures measure whether the "
                  "catalog's tasks can be solved, not an agent's skill.", ""]
    lines += [
        f"- model: `{run.get('model_id')}` ({model.get('provider')})",
        f"- split: `{run.get('task_split', {}).get('name')}` · environment: {run.get('environment', {}).get('adapter')}"
        f" · catalog `{str(run.get('environment', {}).get('catalog', {}).get('data_sha256'))[:12]}…`",
        f"- plan fingerprint: `{run.get('fingerprint', '')[:16]}…`", *stamps_markdown(summary.get("stamps")), "",
        "## Summary", "", "| metric | value |", "|---|---|",
        f"| episodes completed / requested | {c['completed']} / {c['requested']} (coverage {_fmt(c['coverage'], True)}) |",
        f"| failed (technical) | {c['failed']} |",
        f"| reward (r_strict) mean ± SEM | {_fmt(p['reward_mean'])} ± {_fmt(p['reward_sem'])} |",
        f"| success rate | {_fmt(p['success_rate'], True)} |",
        f"| steps per episode | {_fmt(b['steps_mean'])} |",
        f"| protocol-error rate (per model step) | {_fmt(b['protocol_error_rate'], True)} ({b['protocol_errors']}) |",
        f"| invalid-action rate (per env action) | {_fmt(b['invalid_action_rate'], True)} "
        f"({b['invalid_actions']}/{b['total_actions']}) |",
        f"| policy failures | {b['policy_failures']} |",
        f"| terminations | {', '.join(f'{k} {v}' for k, v in b['termination_reasons'].items())} |",
        f"| tokens (prompt / completion / total) | {cost['tokens']['prompt_tokens']} / "
        f"{cost['tokens']['completion_tokens']} / {cost['tokens']['total_tokens']} |",
        "", "## Reward components", "", f"![components]({figure_paths['components.png']})", "",
        "| component | mean |", "|---|---|",
        *[f"| {k} | {_fmt(v)} |" for k, v in summary["reward_components"].items()],
        "", "## Termination reasons and steps", "",
        f"![terminations]({figure_paths['terminations.png']})", "", f"![steps]({figure_paths['steps.png']})", "",
        "## Success by category", "", f"![categories]({figure_paths['categories.png']})", "",
        "| # | category | episodes | success |", "|---|---|---|---|",
        *[f"| {i + 1} | {name} | {n} | {_fmt(rate, True)} |" for i, (name, n, rate) in enumerate(tables["categories"])],
        "", "## Error rates", "", f"![error rates]({figure_paths['error_rates.png']})", "",
    ]
    lines += intervals_markdown(summary.get("intervals"))
    lines += repeats_markdown(summary.get("repeats"))
    if summary.get("by_difficulty"):
        lines += ["## Success by difficulty tier", "",
                  "Tier: the first public-information policy (`first`, `heuristic`, `strong`) that solves the task; "
                  "`none`: none does (`shopsimrl data tiers`).", "",
                  "| tier | episodes | success | r_strict |", "|---|---|---|---|",
                  *[f"| {tier} | {v['episodes']} | {_fmt(v['success_rate'], True)} | {_fmt(v['reward_mean'])} |"
                    for tier, v in summary["by_difficulty"].items()], ""]
    lines += _taxonomy_markdown(summary.get("failure_taxonomy"), figure_paths)
    if summary.get("errors"):
        lines += ["Failed episodes by error type: " + ", ".join(f"{k} {v}" for k, v in summary["errors"].items()), ""]
    if comparison is not None:
        a, bb = comparison["run_a"], comparison["run_b"]
        lines += [
            f"## Paired comparison: {bb['experiment']} (B) − {a['experiment']} (A)", "",
            f"{comparison['paired_episodes']} paired episodes; task-paired percentile bootstrap, "
            f"{next(iter(comparison['metrics'].values()))['resamples']} resamples, 95% intervals.", "",
            f"![paired differences]({figure_paths['paired_differences.png']})", "",
            "| metric | A | B | B − A | 95% CI | 95% CI, leaf clusters |", "|---|---|---|---|---|---|",
            *[f"| {n} | {m['mean_a']:.4f} | {m['mean_b']:.4f} | {m['diff']:+.4f} | [{m['ci_low']:+.4f}, "
              f"{m['ci_high']:+.4f}] | {clustered_cell(m)} |" for n, m in comparison["metrics"].items()],
            "", "| fail → success | success → fail | both succeed | neither |", "|---|---|---|---|",
            "| {fail_to_success} | {success_to_fail} | {both_success} | {neither} |".format(**comparison["transitions"]),
            "",
        ]
        lines += _cause_changes_markdown(comparison.get("taxonomy"))
        for warning in comparison["alignment"]["warnings"]:
            lines.append(f"> note: {warning}")
    return "\n".join(lines) + "\n"


def _taxonomy_markdown(taxonomy: Mapping[str, Any] | None, figure_paths: Mapping[str, str]) -> list[str]:
    """The failure-taxonomy section: primary causes (table and bar chart) and behaviour flags."""
    if not taxonomy:
        return []
    lines = ["## Failure taxonomy", "",
             f"{taxonomy['failures']} of {taxonomy['episodes']} episodes failed; each has one primary cause "
             "(first match in this order). Flags count purchases.", ""]
    if "failure_causes.png" in figure_paths:
        lines += [f"![failure causes]({figure_paths['failure_causes.png']})", ""]
    lines += ["| primary cause | episodes | share of failures |", "|---|---|---|",
              *[f"| {CAUSE_TITLES[c]} | {n} | {_fmt(taxonomy['cause_shares'][c], True)} |"
                for c, n in taxonomy["causes"].items()],
              "", "| behaviour flag | purchases | of which failed | share of purchases |", "|---|---|---|---|",
              *[f"| {FLAG_TITLES[f]} | {v['purchases']} | {v['failed']} | {_fmt(v['share_of_purchases'], True)} |"
                for f, v in taxonomy["flags"].items()], ""]
    return lines


def _cause_changes_markdown(changes: Mapping[str, Any] | None) -> list[str]:
    if not changes:
        return []
    title = {**CAUSE_TITLES, "success": "success"}
    lines = ["### Failure causes: A → B", "",
             f"{changes['changed']} paired episodes changed their outcome or primary cause.", "",
             "| outcome | A | B | B − A |", "|---|---|---|---|",
             *[f"| {title[c]} | {v['a']} | {v['b']} | {v['diff']:+d} |" for c, v in changes["causes"].items()], ""]
    if changes["moves"]:
        lines += ["| A | → B | episodes |", "|---|---|---|",
                  *[f"| {title[m['a']]} | {title[m['b']]} | {m['episodes']} |" for m in changes["moves"][:10]], ""]
    return lines


def _html(markdown: str, figures: Mapping[str, bytes], figure_paths: Mapping[str, str]) -> str:
    """A small Markdown subset (headings, tables, images, lists, quotes) rendered to one self-contained page."""
    inline = {path: f"data:image/png;base64,{base64.b64encode(figures[name]).decode()}"
              for name, path in figure_paths.items()}
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>ShopSimRL report</title><style>",
           "body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}",
           "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}",
           "blockquote{border-left:4px solid #c44e52;margin:0.5em 0;padding:0.2em 1em;background:#fdf3f3}",
           "img{max-width:100%}code{background:#f4f4f4;padding:0 3px}</style></head><body>"]
    table: list[list[str]] = []

    def flush() -> None:
        if table:
            head, *rows = table
            out.append("<table><tr>" + "".join(f"<th>{cell}</th>" for cell in head) + "</tr>")
            out.extend("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
            out.append("</table>")
            table.clear()

    def text(value: str) -> str:
        escaped = html.escape(value)
        parts = escaped.split("`")
        return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts)).replace(
            "**", "")

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if not all(set(cell) <= {"-"} for cell in cells):
                table.append([text(cell) for cell in cells])
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{text(line[level:].strip())}</h{level}>")
        elif line.startswith("!["):
            alt, path = line[2:].split("](", 1)
            out.append(f"<p><img alt='{html.escape(alt)}' src='{inline.get(path[:-1], html.escape(path[:-1]))}'></p>")
        elif line.startswith("> "):
            out.append(f"<blockquote>{text(line[2:])}</blockquote>")
        elif line.startswith("- "):
            out.append(f"<ul><li>{text(line[2:])}</li></ul>")
        elif line.strip():
            out.append(f"<p>{text(line)}</p>")
    flush()
    out.append("</body></html>")
    return "\n".join(out)


def html_page(markdown: str) -> str:
    """A report-styled HTML page of ``markdown`` (no figures)."""
    return _html(markdown, {}, {})


def write_report(
    run: str, *, vs: str | None = None, out: str | None = None, allow_partial: bool = False,
    allow_stamp_mismatch: bool = False,
) -> dict[str, str]:
    """Write ``report.md``, ``report.html`` and the figures; returns their paths. ``vs``: the A run; a pair
    with episodes not completed in both runs is refused (``ConfigError`` (``comparison``)) unless ``allow_partial``, as in
    ``compare``."""
    run_dir = RunDir(run)
    plan = run_dir.plan()
    summary = run_summary(plan, run_dir)
    target = Path(out) if out else run_dir.root
    # with --out the run directory is only read: the refreshed summary goes beside the report
    target.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target / run_dir.summary_path.name if out else run_dir.summary_path, summary)
    ids = {job.episode_id for job in plan.jobs()}
    records = [r for eid, r in sorted(run_dir.records().items()) if eid in ids and is_completed(r)]
    tables = run_tables(records)
    comparison = None
    if vs is not None:
        from .compare import compare_runs

        comparison = compare_runs(vs, run, allow_partial=allow_partial, allow_stamp_mismatch=allow_stamp_mismatch)
    (target / FIGURE_DIR).mkdir(parents=True, exist_ok=True)
    figures = _figures(summary, tables, comparison)
    paths = {name: f"{FIGURE_DIR}/{name}" for name in figures}
    for name, data in figures.items():
        (target / FIGURE_DIR / name).write_bytes(data)
    info = {**plan.plan, "fingerprint": plan.fingerprint}
    title = f"ShopSimRL evaluation: {plan.plan['experiment']}"
    markdown = _markdown(title, summary, tables, comparison, paths, info)
    (target / "report.md").write_text(markdown, "utf-8")
    (target / "report.html").write_text(_html(markdown, figures, paths), "utf-8")
    if comparison is not None:
        write_json_atomic(target / "comparison.json", comparison)
    counts = Counter(name for name in figures)
    return {"md": str(target / "report.md"), "html": str(target / "report.html"), "figures": str(len(counts))}
