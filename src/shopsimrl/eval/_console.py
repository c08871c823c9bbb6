"""Terminal output of an evaluation: a rich progress bar with the live success rate, and summary tables."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from .report_stats import CLUSTER_TITLES
from .rundir import is_completed
from .summary import reward_detail
from .taxonomy import CAUSE_TITLES


def _pct(value: Any) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def _num(value: Any, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


class LiveProgress:
    """Progress over the episodes of one run; the success rate counts completed episodes of this process.

    On a terminal, a rich bar; in a pipe or a log (where rich would print one bar at the end, cut to 80 columns:
    ``1200…``, ``0:0…``), one whole plain line at the first episode, every ``every`` seconds and at the end."""

    def __init__(self, label: str, *, console: Console | None = None, enabled: bool = True, every: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console or Console(file=sys.stderr)
        self.label = label
        self.enabled = enabled
        self.plain = enabled and not self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("success {task.fields[success]}"), TextColumn("failed {task.fields[failed]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, disable=not enabled or self.plain,
        )
        self.task: Any = None
        self.finished = self.successes = self.failures = 0
        self.total = self.skipped = 0
        self.every, self.clock = every, clock
        self.started = 0.0
        self.last_line: float | None = None  # when the last plain line was printed, and what it said
        self._printed: tuple[int, int] = (-1, -1)
        self.seen: set[str] = set()

    def start(self, total: int, skipped: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task(self.label, total=total, completed=skipped, success="—", failed=0)
        self.total, self.skipped, self.started = total, skipped, self.clock()
        if skipped:
            self._say(f"resuming: {skipped} of {total} episodes already completed")

    def record(self, record: Mapping[str, Any]) -> None:
        if is_completed(record):
            self.finished += 1
            self.successes += 1 if reward_detail(record).get("r_success") == 1 else 0
            self.progress.advance(self.task)
        else:
            self.failures += 1
        self.progress.update(self.task, success=_pct(self.successes / self.finished) if self.finished else "—",
                             failed=self.failures)
        if self.plain:
            now = self.clock()
            if self.last_line is None or now - self.last_line >= self.every or self._done() >= self.total:
                self._line(now)

    def stop(self) -> None:
        self.progress.stop()
        if self.plain and self.task is not None and self.last_line is not None and self._printed != self._state():
            self._line(self.clock())  # the run ended between two lines (or stopped early): its last state

    def _done(self) -> int:
        return self.skipped + self.finished

    def _state(self) -> tuple[int, int]:
        return self._done(), self.failures

    def _line(self, now: float) -> None:
        self.last_line, self._printed = now, self._state()
        elapsed = int(now - self.started)
        success = _pct(self.successes / self.finished) if self.finished else "—"
        self._say(f"{self.label}: {self._done()}/{self.total} episodes, success {success}, failed {self.failures}, "
                  f"{elapsed // 60}:{elapsed % 60:02d} elapsed")

    def _say(self, message: str) -> None:
        """A whole line (rich would wrap or cut it at the console's width outside a terminal)."""
        if self.plain:
            print(f"[shopsimrl] {message}", file=self.console.file, flush=True)
        else:
            self.console.print(message)


def summary_table(summary: Mapping[str, Any], title: str) -> Table:
    counts, primary = summary["counts"], summary["primary"]
    behavior, cost = summary["behavior"], summary["cost"]
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    sem = primary.get("reward_sem")
    rows = [
        ("episodes completed / requested", f"{counts['completed']} / {counts['requested']}"),
        ("coverage", _pct(counts["coverage"])),
        ("failed (technical)", str(counts["failed"])),
        ("reward (r_strict) mean ± SEM", f"{_num(primary['reward_mean'])} ± {_num(sem)}"),
        ("success rate", _pct(primary["success_rate"])),
    ]
    for unit, row in ((summary.get("intervals") or {}).get("r_strict") or {}).items():
        rows.append((f"  r_strict 95% CI over {CLUSTER_TITLES[unit]} ({row['clusters']})",
                     f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]"))
    rows += [(f"  {key}", _num(value)) for key, value in summary["reward_components"].items()]
    rows += [
        ("steps per episode", _num(behavior["steps_mean"], 2)),
        ("protocol-error rate (per model step)",
         f"{_pct(behavior['protocol_error_rate'])} ({behavior['protocol_errors']})"),
        ("invalid-action rate (per env action)",
         f"{_pct(behavior['invalid_action_rate'])} ({behavior['invalid_actions']}/{behavior['total_actions']})"),
        ("policy failures (generation_length)", str(behavior["policy_failures"])),
        ("terminations", ", ".join(f"{k} {v}" for k, v in behavior["termination_reasons"].items()) or "—"),
        ("completion tokens per step", _num(cost.get("completion_tokens_per_step"), 1)),
        ("mean episode wall time", "—" if cost["duration_ms_mean"] is None else f"{cost['duration_ms_mean']:.1f} ms"),
    ]
    dialogue = summary.get("dialogue")
    if dialogue:  # dialogue runs only
        rows += [
            ("questions per episode", _num(dialogue["questions_per_episode"], 2)),
            ("slot recall (revealed / total)",
             f"{_pct(dialogue['slot_recall'])} ({dialogue['slots_revealed']}/{dialogue['slots_total']})"),
            ("purchases after a 'not complete' reply",
             f"{dialogue['purchases_after_incomplete']} (of {dialogue['episodes_told_incomplete']} told)"),
            ("unanswered-question rate", f"{_pct(dialogue['unanswered_question_rate'])}"),
        ]
    repeats = summary.get("repeats")
    if repeats:  # --repeats K > 1
        k = str(repeats["repeats"])
        rows += [
            (f"success over {k} repeats (mean ± std)",
             f"{_pct(repeats['success_rate_mean'])} ± {_pct(repeats['success_rate_std'] or 0.0)}"),
            ("r_strict per seed (mean; max − min)",
             ", ".join(_num(v) for v in repeats["per_repeat"]["reward_mean"])
             + f"; {_num(max(repeats['per_repeat']['reward_mean']) - min(repeats['per_repeat']['reward_mean']))}"),
            (f"pass^{k} / pass@{k}", f"{_pct(repeats['pass_hat_k'][k])} / {_pct(repeats['pass_at_k'][k])}"),
            ("flip rate (tasks)", f"{_pct(repeats['flip_rate'])} of {repeats['tasks']}"
             + (" · repeats byte-identical" if repeats["identical"] else "")),
        ]
    tiers = summary.get("by_difficulty")
    if tiers:
        rows.append(("success by difficulty tier", ", ".join(f"{tier} {_pct(v['success_rate'])} ({v['episodes']})"
                                                            for tier, v in tiers.items())))
    taxonomy = summary.get("failure_taxonomy")
    if taxonomy and taxonomy["causes"]:
        rows.append(("failure causes", ", ".join(f"{CAUSE_TITLES[c]} {n}" for c, n in taxonomy["causes"].items())))
    if summary.get("errors"):
        rows.append(("error types", ", ".join(f"{k} {v}" for k, v in summary["errors"].items())))
    stamps = summary.get("stamps")
    if stamps:
        rows.append(("version stamps", " · ".join(f"{key.removesuffix('_sha256')} "
                                                  f"{str(value)[:12] if key.endswith('sha256') else value}"
                                                  for key, value in stamps.items())))
    for key, value in rows:
        table.add_row(key, value)
    return table
