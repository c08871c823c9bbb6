"""What cli.py and the command modules it registers share (argparse types, progress bars), so that a command
module never imports the top-level CLI back."""

from __future__ import annotations

import argparse
import sys
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
def episode_bars(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A ``progress(label, done, total)`` drawing one bar per label on stderr (``quiet``: off unless a tty)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        transient=True, disable=quiet and not sys.stderr.isatty(),
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(f"{label} episodes", total=total)
            bar.update(tasks[label], completed=done)

        yield progress
