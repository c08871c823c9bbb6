"""The ``--data`` flag of every command that opens a catalog: a prepared directory, or (flag omitted) the
default catalog in the per-user cache, built on first use with a progress bar (``generate/user_cache.py``)."""

from __future__ import annotations

import sys
from typing import Any

from .cli_shared import say

DATA_HELP = ("a prepared data directory (default: the default catalog in the user cache directory, "
             "$SHOPSIMRL_CACHE_DIR or $XDG_CACHE_HOME/shopsimrl, built on first use)")


def add_data_argument(parser: Any, *, positional: str | None = None, help: str = DATA_HELP) -> None:
    """``--data DIR`` (or an optional positional ``positional``), defaulting to the cached default catalog."""
    if positional:
        parser.add_argument(positional, nargs="?", default=None, help=help)
    else:
        parser.add_argument("--data", default=None, help=help)


def resolve_data(value: str | None) -> str:
    """``value`` itself, or the cached default catalog's directory (built now if this is its first use)."""
    if value is not None:
        return value
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from .generate import GeneratorConfig
    from .generate.user_cache import BuildEvents, default_catalog_dir, ensure_default_catalog, is_complete

    directory = default_catalog_dir()
    if is_complete(directory):
        return str(directory)
    console = Console(file=sys.stderr)
    say(f"first use: building the default catalog in {directory} (once per generator version; --data DIR uses "
         "another catalog)")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False,
                  disable=not console.is_terminal) as bar:
        products = bar.add_task("generating products", total=GeneratorConfig().products)
        stage = bar.add_task("preparing (waits for generation)", total=None)

        def on_stage(message: str) -> None:
            if not console.is_terminal:
                say(message.strip())
            if not message.startswith("generating "):
                bar.update(products, completed=GeneratorConfig().products)
                bar.update(stage, description=f"preparing: {message.strip()}")

        events = BuildEvents(
            stage=on_stage, generated=lambda n: bar.advance(products, n),
            waiting=lambda: say("another process is building it; waiting for it to finish"),
        )
        path = ensure_default_catalog(events=events)
        bar.update(stage, description="prepared", total=1, completed=1)
    say(f"default catalog ready: {path}")
    return str(path)


def check_data(directory: str, split: str | None = None) -> None:
    """Path and split mistakes are reported before the (slow) catalog is opened."""
    from .catalog.store import check_data_dir

    check_data_dir(directory, split)
