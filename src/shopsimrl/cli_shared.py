"""What cli.py and the command modules it registers share (argparse types, progress bars), so that a command
module never imports the top-level CLI back."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def positive_int(text: str) -> int:
    """An argparse type: an integer ≥ 1 (a clear usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


@contextmanager
def episode_bars(quiet: bool, *, every: float = 5.0) -> Iterator[Callable[[str, int, int], None]]:
    """``progress(label, done, total)``: one bar per label on a terminal; in a pipe or a log, one line every
    ``every`` seconds (and at each label's end) on stderr, so a long run is never silent (``quiet`` only keeps
    the bars off a terminal's stdout-bound JSON runs: lines still go to stderr)."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      transient=True, console=Console(stderr=True)) as bar:
            tasks: dict[str, Any] = {}

            def update(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(f"{label} episodes", total=total)
                bar.update(tasks[label], completed=done)

            yield update
        return
    last = [0.0]

    def line(label: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= every or done == total:
            last[0] = now
            print(f"[shopsimrl] {label} episodes {done}/{total} ({done / max(total, 1):.0%})", file=sys.stderr,
                  flush=True)

    yield line


def say(message: str) -> None:
    """A plain stderr line (not through rich: ``[shopsimrl]`` is no markup, and paths are never wrapped)."""
    print(f"[shopsimrl] {message}", file=sys.stderr, flush=True)
