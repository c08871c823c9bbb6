"""Argparse types shared by the subcommands' parsers (cli.py and the command modules it registers), so a command
module never imports the top-level CLI back."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: an integer ≥ 1 (a clear usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
