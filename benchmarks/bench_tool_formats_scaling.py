"""Response-parser time against input size (``shopsimrl.train.tool_formats``): adversarial families per format.

Each family repeats a unit n, 4n and 16n times between a head and a tail (unclosed strings, backslash runs, quotes
that close nothing, openers without closers, many messages or arguments). A linear parser takes about 4× longer
for 4× the text; the script prints the times and the ratios (16n / 4n) and exits 1 when one exceeds
``--max-ratio`` (default 6: noise allowance over 4). A DataError is a result here, like a parse.

Usage: ``python benchmarks/bench_tool_formats_scaling.py [--base N] [--max-ratio R]``
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable

from bench_budget_scaling import best_time, ratio_report
from shopsimrl.errors import DataError
from shopsimrl.train import tool_formats as tf

GEMMA, LFM2 = "<|tool_call>call:f{", "<|tool_call_start|>[f("
FAMILIES: tuple[tuple[str, Callable[..., object], str, str, str], ...] = (
    ("gemma4 string", tf.parse_gemma4, GEMMA + 'a:<|"|>', "x<|", '<|"|>}<tool_call|>'),
    ("gemma4 unclosed", tf.parse_gemma4, GEMMA + 'a:<|"|>', "<|\"", ""),
    ("gemma4 list", tf.parse_gemma4, GEMMA + "a:[", "1,", "1]}<tool_call|>"),
    ("gemma4 calls", tf.parse_gemma4, "", GEMMA + "a:1}<tool_call|>", ""),
    ("gemma4 openers", tf.parse_gemma4, "", "<|tool_call>call:", "{a:1}<tool_call|>"),
    ("lfm2 backslashes", tf.parse_lfm2, LFM2 + "a='", "\\\\", "')]<|tool_call_end|>"),
    ("lfm2 unclosed", tf.parse_lfm2, LFM2 + "a='", "\\'", ""),
    ("lfm2 args", tf.parse_lfm2, LFM2, "a='x', ", "b=1)]<|tool_call_end|>"),
    ("lfm2.5 quotes", tf.parse_lfm2_raw, LFM2 + "a='", "' x", "')]<|tool_call_end|>"),
    ("lfm2.5 spaces", tf.parse_lfm2_raw, LFM2 + "a='", "'    y", ""),
    ("glm args", tf.parse_glm, "<tool_call>f", "<arg_key>k</arg_key><arg_value>v</arg_value>", "</tool_call>"),
    ("glm unclosed", tf.parse_glm, "", "<tool_call>f<arg_key>", ""),
    ("harmony messages", tf.parse_harmony, "", "<|start|>assistant<|channel|>analysis<|message|>x<|end|>", ""),
    ("harmony headers", tf.parse_harmony, " to=functions.f", "<|channel|>commentary ", "json<|message|>{}"),
    ("llama json", tf.parse_llama_json, '{"name": "f", "parameters": {"a": "', "x\\\"", '"}}'),
    ("think reopened", lambda text, tools: tf.reopen_think(text, "<think>\n"), "", "x", "</think>"),
)


def _timed(parse: Callable[..., object], text: str) -> float:
    def call() -> None:
        with contextlib.suppress(DataError):
            parse(text, ())

    return best_time(call)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=4000, help="repetitions of the smallest input")
    parser.add_argument("--max-ratio", type=float, default=6.0)
    args, _ = parser.parse_known_args(argv)
    rows = [(f[0], lambda n, f=f: _timed(f[1], f[2] + f[3] * n + f[4])) for f in FAMILIES]
    return ratio_report(rows, args.base, args.max_ratio, width=18)


if __name__ == "__main__":
    raise SystemExit(main())
