"""Budget parser time against input size: every phrase family, repeated n, 4n and 16n times.

A linear parser takes about 4× longer for 4× the text; the script prints each family's times and the ratios
(16n / 4n), and exits 1 when a ratio exceeds ``--max-ratio`` (default 6: noise allowance over 4).

Usage: ``python benchmarks/bench_budget_scaling.py [--base N] [--max-ratio R]``
"""

from __future__ import annotations

import argparse
import time

from shopsimrl.budget import parse_budget_detail

FAMILIES = (
    "价格在70元左右，", "两三块", "三十几块的那种", "几块", "1元以内或", "付五百元左右的定金", "80元左右一斤",
    "租金300以内", "花个30块", "130-140元之间", "不超过一千八", "每平米850块", "\n", "9",
    # issue 28: one long numeral token (cubic before the one-pass reader and the token cap)
    "1万", "十百千万", "一万二千", "块元", "后续补170元左右的",
)


def seconds(text: str, repeats: int = 3) -> float:
    """Best CPU time of ``repeats`` runs (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        parse_budget_detail(text)
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=2000, help="repetitions of the smallest input")
    parser.add_argument("--max-ratio", type=float, default=6.0)
    args, _ = parser.parse_known_args(argv)
    worst = 0.0
    print(f"{'family':<14} {'n':>8} {'4n':>8} {'16n':>8}  ratio 16n/4n")
    for unit in FAMILIES:
        times = [seconds(unit * args.base * factor) for factor in (1, 4, 16)]
        ratio = times[2] / max(times[1], 1e-9)
        worst = max(worst, ratio)
        print(f"{unit!r:<14} " + " ".join(f"{t * 1000:7.1f}ms" for t in times) + f"  {ratio:5.1f}")
    print(f"worst ratio {worst:.1f} (linear: 4; limit {args.max_ratio})")
    return 0 if worst <= args.max_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
